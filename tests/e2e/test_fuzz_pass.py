"""The fuzz pass's short form (bench/fuzz.py --short) against a real node.

One PostgreSQL + Redis node with an API token; every REST operation of its
schema, every Connect RPC, every worker frame, /ws/events, the
Authorization header, the routes outside the API and the dashboard's
pages and forms (signed in as a superuser) get hostile input
(each input one hostile value, taken in turn: a few hundred requests). No
answer may be a 5xx, every HTTP error is the JSON error shape, every
WebSocket answer an error frame and a close code, and the node logs no
traceback. (docs/operations.md, "What we test".)
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.fuzz import TOKEN, Fuzzer, Report, create_staff
from tests.e2e.conftest import module_node
from tests.e2e.support import ROOT, NodeProcess

pytestmark = pytest.mark.slow

SURFACES = {"rest", "connect", "ws-worker", "ws-events", "sse-events", "auth", "other", "dashboard"}


@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with module_node(request, "cluster", tmp_path_factory.mktemp("fuzz"), CONVEYOR_API_TOKENS=TOKEN) as proc:
        create_staff(sys.executable, ROOT, proc.env)  # the dashboard's superuser
        yield proc


@pytest.fixture(scope="module")
def report(node: NodeProcess) -> Report:
    report = Fuzzer(node.url, node.output, short=True).run()
    print(report.table())
    return report


def failures(report: Report) -> str:
    return "\n".join(report.failures[:40])


def test_the_short_pass_reaches_every_surface_with_hundreds_of_inputs(report):
    assert set(report.surfaces) == SURFACES, failures(report)
    assert report.total("tried") >= 300
    assert not [f for f in report.failures if "the fuzzer stopped" in f], failures(report)


def test_no_hostile_input_gets_a_5xx(report):
    assert report.total("five_xx") == 0, failures(report)


def test_every_http_error_is_the_json_error_shape(report):
    assert report.total("bad_shape") == 0, failures(report)


def test_every_websocket_answer_is_an_error_frame_and_a_close_code(report):
    assert report.total("ws_bad") == 0, failures(report)


def test_no_hostile_input_makes_the_node_log_a_traceback(report):
    assert report.total("tracebacks") == 0, failures(report)


# -- what the full pass found on the dashboard: a NUL in an id or a form field (PostgreSQL refuses it in text)

NUL = "a%00b"
NUL_CASES = [
    # (method, path, form, the field the page names); {task} and {hook} are this test's own
    ("GET", f"/tasks/{NUL}/", None, "task_id"),
    ("POST", f"/tasks/{NUL}/run", "", "task_id"),
    ("POST", f"/tasks/{NUL}/cancel", "", "task_id"),
    ("POST", "/tasks/{task}/run", f"next={NUL}", "next"),
    ("POST", "/tasks/{task}/reschedule", f"process_in={NUL}&process_at=", "process_in"),
    ("GET", f"/webhooks/{NUL}/edit", None, "name"),
    ("POST", f"/webhooks/{NUL}/edit", "url=https%3A%2F%2Fhooks.example%2Fz&queues=q%3D1", "name"),
    ("POST", f"/webhooks/{NUL}/pause", "", "name"),
    ("POST", "/webhooks/new", f"name={NUL}&url=https%3A%2F%2Fhooks.example%2Fz&queues=q%3D1", "name"),
    ("POST", "/webhooks/new", f"name=nul-new&url=https%3A%2F%2Fhooks.example%2F{NUL}&queues=q%3D1", "url"),
    ("POST", "/webhooks/{hook}/edit", f"url=https%3A%2F%2Fhooks.example%2Fz&queues=q%3D1&batch_types={NUL}",
     "batch_types"),
    ("POST", "/webhooks/{hook}/edit", f"url=https%3A%2F%2Fhooks.example%2Fz&queues=q%3D1&new_secret={NUL}",
     "new_secret"),
]  # fmt: skip


@pytest.fixture(scope="module")
def staff_session(node: NodeProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=node.url, timeout=30) as client:
        Fuzzer(node.url, node.output).log_in(client)
        client.headers.update({"X-CSRFToken": client.cookies.get("csrftoken", ""), "Referer": node.url + "/"})
        yield client


def snapshot(node: NodeProcess, task_id: str) -> dict[str, Any]:
    """What a NUL must not change: the task, and every webhook registration (their live status aside)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    hooks = node.http.get("/api/v1/webhooks", headers=auth).json()["webhooks"]
    return {"task": node.http.get(f"/api/v1/tasks/{task_id}", headers=auth).json(),
            "webhooks": [{k: v for k, v in h.items() if k != "status"} for h in hooks]}  # fmt: skip


@pytest.mark.parametrize(("method", "path", "form", "field"), NUL_CASES)
def test_a_nul_in_a_dashboard_id_or_form_field_is_a_400_page_naming_it_and_changes_nothing(
    node: NodeProcess, staff_session: httpx.Client, method: str, path: str, form: str | None, field: str
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    name = f"nul-{uuid.uuid4().hex[:8]}"
    task = node.api("POST", "/api/v1/tasks", json={"type": "nul", "queue": name, "process_in": "1h"}, headers=auth)
    node.api("POST", "/api/v1/webhooks", json={"name": name, "url": "https://hooks.example/x",
                                               "queues": {name: 1}, "secrets": ["s" * 32]}, headers=auth)  # fmt: skip
    before = snapshot(node, task["id"])
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}
    path = path.replace("{task}", task["id"]).replace("{hook}", name)
    response = staff_session.request(method, path, content=form, headers=headers)
    assert response.status_code == 400, response.text[:2000]
    assert f"{field}: must not contain NUL characters" in response.text
    assert "Nothing was changed." in response.text
    assert snapshot(node, task["id"]) == before
