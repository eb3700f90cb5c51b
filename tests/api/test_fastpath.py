"""The node's ASGI fast path for enqueue answers exactly as the Django views do.

A node serves ``POST /api/v1/tasks`` and ``POST /api/v1/tasks/batch`` through
``conveyor.api.fastpath`` (in front of Django); Django's test client
never goes there. Each request below is sent both ways and must get the same
status and the same error (code, field, index) or the same task.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from conveyor.models import Task
from conveyor_site.asgi import application
from tests.api.conftest import TOKEN, Api, enqueue

pytestmark = pytest.mark.django_db(transaction=True)

VOLATILE = {"id", "enqueuedAt", "enqueued_at", "dueAt", "due_at", "updatedAt", "updated_at"}

REST_CASES = [
    pytest.param({"type": "x", "queue": "q", "json": {"a": 1}}, id="valid"),
    pytest.param({"type": "x", "id": "fixed-id"}, id="known-id"),
    pytest.param({"type": "x", "unique_key": "held"}, id="duplicate"),
    pytest.param({"type": "x", "bogus": 1}, id="unknown-field"),
    pytest.param(
        {"queue": "email", "type": "email:send", "payload": "eyJ0byI6ImFAYi5jIn0=", "contentType": "application/json"},
        id="seed-body",
    ),
    pytest.param({"type": "x", "queue": "-bad"}, id="bad-queue"),
    pytest.param({"type": "x", "process_in": "soon"}, id="bad-duration"),
    pytest.param({"type": "x", "process_at": "noon"}, id="bad-timestamp"),
    pytest.param({"type": "x", "payload": "!!"}, id="bad-base64"),
    pytest.param([{"type": "x"}], id="array"),
    pytest.param(b"", id="empty-body"),
    pytest.param(b"{bad", id="not-json"),
    pytest.param(b'{"type": "x", "priority": NaN}', id="nan"),
    pytest.param(b'{"type": "\xff"}', id="bad-utf8"),
    pytest.param(b"[" * 50_000 + b"]" * 50_000, id="nested-too-deep"),
]
BATCH_CASES = [
    pytest.param({"tasks": [{"type": "x", "json": {"n": i}} for i in range(3)]}, id="valid"),
    pytest.param({"tasks": [{"type": "x"}, {"type": "x", "queue": "-bad"}, {"type": "x"}]}, id="one-bad-item"),
    pytest.param(
        {"tasks": [{"type": "x", "unique_key": "held"}, {"type": "x", "id": "fixed-id"}]}, id="duplicate-known"
    ),
    pytest.param(
        {"tasks": [{"type": "x", "unique_key": "k"}, {"type": "x", "unique_key": "k"}]}, id="duplicate-inside"
    ),
    pytest.param({"tasks": []}, id="empty"),
    pytest.param({"tasks": [{"type": "x"}] * 1001}, id="too-many"),
    pytest.param({"jobs": [{"type": "x"}]}, id="no-tasks-field"),
    pytest.param({"tasks": {"type": "x"}}, id="tasks-not-a-list"),
    pytest.param([{"type": "x"}], id="array"),
    pytest.param(b"{bad", id="not-json"),
]


def raw(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def via_fast_path(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, httpx.Headers]:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.post(path, content=body, headers={"Content-Type": "application/json", **headers})

    response = async_to_sync(send)()
    return response.status_code, response.json(), response.headers


def via_django(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, Any]:
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    response = Api().client.post(path, data=body, content_type="application/json", **extra)
    return response.status_code, response.json(), response


def comparable(body: Any) -> Any:
    """What must agree: the error's code, field and index, or the task minus ids and times."""
    if not isinstance(body, dict):
        return body
    if "error" in body:
        return {k: body[k] for k in ("error", "field", "index", "unique_key") if k in body}
    if "code" in body and "message" in body:
        # Connect errors: code, and the field the message names.
        named = body["message"].split(": ")[0] if body["code"] == "invalid_argument" else None
        return {"code": body["code"], "named": named}
    task = body.get("task", body)
    return {k: v for k, v in task.items() if k not in VOLATILE} | (
        {"created": body["created"]} if "created" in body else {}
    )


def both_ways(path: str, body: bytes, broker: Any) -> tuple[Any, Any]:
    """The same request through the fast path and through Django, each on the
    same stored state: a task holding unique key "held" and one with id "fixed-id"."""

    def setup() -> None:
        Task.objects.all().delete()
        enqueue(broker, unique_key="held")
        enqueue(broker, id="fixed-id", type="stored")

    setup()
    fast = via_fast_path(path, body, {})
    setup()
    slow = via_django(path, body, {})
    return fast, slow


@pytest.mark.parametrize("body", REST_CASES)
def test_rest_enqueue_fast_path_matches_the_view(broker, body):
    (fast_status, fast_body, _), (slow_status, slow_body, _) = both_ways("/api/v1/tasks", raw(body), broker)
    assert fast_status == slow_status
    assert fast_status < 500
    assert comparable(fast_body) == comparable(slow_body)


@pytest.mark.parametrize("body", BATCH_CASES)
def test_batch_enqueue_fast_path_matches_the_view(broker, body):
    (fast_status, fast_body, _), (slow_status, slow_body, _) = both_ways("/api/v1/tasks/batch", raw(body), broker)
    assert fast_status == slow_status
    assert fast_status < 500

    def each(answer: Any) -> Any:
        if isinstance(answer, dict) and "results" in answer:
            return [{"index": r["index"]} | comparable(r.get("error", r)) for r in answer["results"]]
        return comparable(answer)

    assert each(fast_body) == each(slow_body)


@pytest.mark.parametrize("path", ["/api/v1/tasks", "/api/v1/tasks/batch"])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no-token", "wrong-token"])
def test_fast_path_without_a_valid_token_is_401_like_the_view(tokens, path, headers):
    status, body, response_headers = via_fast_path(path, b'{"type": "x"}', headers)
    assert status == 401
    assert body.get("error", body.get("code")) == "unauthenticated"
    assert set(body) in ({"error", "message"}, {"code", "message"})
    if path.startswith("/api/"):
        assert response_headers["www-authenticate"] == 'Bearer realm="conveyor"'
    assert Task.objects.count() == 0
    assert via_django(path, b'{"type": "x"}', headers)[0] == 401


def test_fast_path_with_a_token_enqueues(tokens):
    status, body, _ = via_fast_path("/api/v1/tasks", b'{"type": "x"}', {"Authorization": f"Bearer {TOKEN}"})
    assert status == 201
    assert Task.objects.filter(id=body["id"]).exists()


def test_fast_path_enqueues_in_read_only_mode():
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        status, body, _ = via_fast_path("/api/v1/tasks", b'{"type": "x"}', {})
    assert status == 201
    assert Task.objects.filter(id=body["id"]).exists()


MINIMAL_BATCH = {"tasks": [{"type": "a", "queue": "q"}, {"type": ""}, {"type": "b", "unique_key": "held"}, {"id": "fixed-id", "type": "x"}]}  # fmt: skip


@pytest.mark.parametrize("way", [via_fast_path, via_django], ids=["fast-path", "view"])
def test_a_batch_with_prefer_return_minimal_answers_each_stored_tasks_id_and_state(broker, way):
    Task.objects.all().delete()
    enqueue(broker, unique_key="held")
    enqueue(broker, id="fixed-id", type="stored")
    status, body, headers = way("/api/v1/tasks/batch", raw(MINIMAL_BATCH), {"Prefer": "respond-async, return=minimal"})
    assert status == 200
    assert headers["Preference-Applied"] == "return=minimal"
    stored, refused, duplicate, known = body["results"]
    assert set(stored) == {"index", "created", "id", "state"}
    assert (stored["index"], stored["created"], stored["state"]) == (0, True, "pending")
    assert Task.objects.get(id=stored["id"]).type == "a"
    assert (refused["index"], refused["error"]["field"]) == (1, "type")  # errors as without the preference
    assert duplicate["error"]["error"] == "already_exists"
    assert (known["created"], known["id"], known["state"]) == (False, "fixed-id", "pending")


@pytest.mark.parametrize("way", [via_fast_path, via_django], ids=["fast-path", "view"])
@pytest.mark.parametrize("prefer", [None, "return=representation", "minimal"])
def test_a_batch_without_the_minimal_preference_answers_whole_tasks(broker, way, prefer):
    status, body, headers = way(
        "/api/v1/tasks/batch", raw({"tasks": [{"type": "a"}]}), {"Prefer": prefer} if prefer else {}
    )
    assert status == 200
    assert "Preference-Applied" not in headers
    assert body["results"][0]["task"]["type"] == "a"
    assert "id" not in body["results"][0]


@pytest.mark.parametrize(
    ("prefer", "minimal"),
    [("return=minimal", True), ("RETURN = Minimal", True), ("wait=5, return=minimal; x=y", True),
     ("return=representation", False), ("return=minimalist", False), ("", False), (None, False)],
)  # fmt: skip
def test_the_prefer_header_is_read_as_rfc_7240_writes_it(prefer, minimal):
    from conveyor.api.render import wants_minimal

    assert wants_minimal(prefer) is minimal
