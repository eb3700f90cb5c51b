"""Another site's page cannot change a tokenless node (``--dev``, ``CONVEYOR_ALLOW_UNAUTHENTICATED=1``).

A page a developer visits can POST a form, ``text/plain`` or an untyped
body to any address with no CORS preflight, and the browser sends its
``Origin``. Every change on the REST API and the Connect services refuses a
foreign ``Origin`` (403) and the form body types (415), with the JSON error
shape of its surface, and changes nothing. Each case runs against a real
dev node and a real PostgreSQL + Redis node without tokens.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import module_node
from tests.e2e.support import NodeProcess

EVIL = "http://evil.example"
TRUSTED = "https://dashboard.example"
FORM_TYPES = ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"]
HOOK = {"name": "stolen", "url": "https://evil.example/hook", "queues": {"default": 1}, "secrets": ["s" * 24]}


@pytest.fixture(scope="module", params=["dev", "cluster"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with module_node(request, request.param, tmp_path_factory.mktemp("cross-site"),
                     DJANGO_CSRF_TRUSTED_ORIGINS=TRUSTED) as proc:  # fmt: skip
        yield proc


@pytest.fixture
def queue() -> str:
    return f"xs-{uuid.uuid4().hex[:10]}"


def post(node: NodeProcess, path: str, body: bytes | str, content_type: str | None, origin: str | None = EVIL,
         method: str = "POST") -> httpx.Response:  # fmt: skip
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if origin is not None:
        headers["Origin"] = origin
    # httpx sends no Content-Type for raw bytes unless told: an untyped Blob's fetch().
    return node.http.request(method, path, content=body, headers=headers)


def paused(node: NodeProcess, queue: str) -> bool:
    return any(q["name"] == queue and q["paused"] for q in node.api("GET", "/api/v1/queues")["queues"])


def webhooks(node: NodeProcess) -> list[str]:
    return [w["name"] for w in node.api("GET", "/api/v1/webhooks")["webhooks"]]


def tasks_in(node: NodeProcess, queue: str) -> list[str]:
    return [t["id"] for t in node.api("GET", f"/api/v1/tasks?queue={queue}")["tasks"]]


def assert_rest_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"] == code and response.json()["message"], response.text


def assert_connect_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert set(response.json()) == {"code", "message"} and response.json()["code"] == code, response.text


# -- REST ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [*FORM_TYPES, None])
def test_a_pause_posted_by_another_sites_page_is_refused_and_pauses_nothing(node, queue, content_type):
    response = post(node, f"/api/v1/queues/{queue}/pause", b"a=b" if content_type else b"", content_type)

    assert_rest_error(response, 403, "permission_denied")
    assert "evil.example" in response.json()["message"] and "CSRF_TRUSTED_ORIGINS" in response.json()["message"]
    assert not paused(node, queue)


@pytest.mark.parametrize("content_type", FORM_TYPES)
def test_a_form_body_is_refused_even_without_an_origin_and_changes_nothing(node, queue, content_type):
    pause = post(node, f"/api/v1/queues/{queue}/pause", b"a=b", content_type, origin=None)
    enqueue = post(node, "/api/v1/tasks", json.dumps({"type": "x", "queue": queue}), content_type, origin=None)
    hook = post(node, "/api/v1/webhooks", json.dumps(HOOK), content_type, origin=None)

    for response in (pause, enqueue, hook):
        assert_rest_error(response, 415, "unsupported_media_type")
        assert "send application/json" in response.json()["message"]
    assert not paused(node, queue) and tasks_in(node, queue) == [] and "stolen" not in webhooks(node)


def test_a_json_enqueue_from_another_sites_page_is_refused_and_stores_nothing(node, queue):
    # The fast path takes JSON enqueues before Django: a page's Origin must not slip past it.
    one = post(node, "/api/v1/tasks", json.dumps({"type": "x", "queue": queue}), "application/json")
    batch = post(node, "/api/v1/tasks/batch", json.dumps({"tasks": [{"type": "x", "queue": queue}]}), "text/plain")

    assert_rest_error(one, 403, "permission_denied")
    assert_rest_error(batch, 403, "permission_denied")
    assert tasks_in(node, queue) == []


def test_a_delete_from_another_sites_page_is_refused_and_the_task_stays(node, queue):
    task = node.enqueue(queue=queue, process_in="1h")

    response = post(node, f"/api/v1/tasks/{task['id']}", b"", None, method="DELETE")

    assert_rest_error(response, 403, "permission_denied")
    assert node.task(task["id"])["state"] == "scheduled"


def test_a_webhook_registration_from_another_sites_page_is_refused(node):
    response = post(node, "/api/v1/webhooks", json.dumps(HOOK), "text/plain")

    assert_rest_error(response, 403, "permission_denied")
    assert "stolen" not in webhooks(node)


@pytest.mark.parametrize("origin", ["own", TRUSTED])
def test_the_sites_own_pages_and_trusted_origins_still_change_things(node, queue, origin):
    response = post(node, f"/api/v1/queues/{queue}/pause", b"", None, origin=node.url if origin == "own" else origin)

    assert response.status_code == 200, response.text
    assert paused(node, queue)


# -- Connect --------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, *FORM_TYPES, "application/json"])
def test_a_connect_webhook_registration_from_another_sites_page_is_refused(node, content_type):
    body = json.dumps({"worker": HOOK})

    response = post(node, "/conveyor.v1.AdminService/UpsertWebhookWorker", body, content_type)

    assert_connect_error(response, 403, "permission_denied")
    assert "stolen" not in webhooks(node)


@pytest.mark.parametrize("content_type", [None, *FORM_TYPES])
def test_a_connect_call_without_a_connect_content_type_is_refused_with_a_json_error(node, queue, content_type):
    hook = post(node, "/conveyor.v1.AdminService/UpsertWebhookWorker", json.dumps({"worker": HOOK}), content_type,
                origin=None)  # fmt: skip
    pause = post(node, "/conveyor.v1.AdminService/PauseQueue", json.dumps({"queue": queue}), content_type, origin=None)

    for response in (hook, pause):
        assert_connect_error(response, 415, "invalid_argument")
        assert "application/json or application/proto" in response.json()["message"]
        assert "application/json" in response.headers["accept-post"]
    assert "stolen" not in webhooks(node) and not paused(node, queue)


def test_a_connect_enqueue_from_another_sites_page_stores_nothing(node, queue):
    response = post(node, "/conveyor.v1.TaskService/Enqueue", json.dumps({"type": "x", "queue": queue}), "text/plain")

    assert_connect_error(response, 403, "permission_denied")
    assert tasks_in(node, queue) == []


def test_a_connect_call_from_the_sites_own_page_is_served(node, queue):
    response = post(node, "/conveyor.v1.AdminService/PauseQueue", json.dumps({"queue": queue}), "application/json",
                    origin=node.url)  # fmt: skip

    assert response.status_code == 200, response.text
    assert paused(node, queue)
