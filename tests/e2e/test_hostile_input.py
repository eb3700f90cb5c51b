"""Text PostgreSQL cannot store, and other hostile input, against a real PostgreSQL + Redis node.

PostgreSQL's text and jsonb refuse NUL, and a lone surrogate (a ``\\ud800``
escape in JSON) has no UTF-8 encoding. A request carrying either is a 400
naming the field (REST) or ``invalid_argument`` (Connect), never a 500, and
stores nothing. A worker's error text is kept, not refused: the outcome must
not be lost, so NUL and lone surrogates become U+FFFD. A ``hello`` whose
labels PostgreSQL would refuse is refused with an error frame (its session
row could not be written, and the worker would take tasks while never
being listed).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from conveyor.sdk import protocol as p
from tests.e2e.conftest import module_node
from tests.e2e.support import NodeProcess, wait_for

NUL, SURROGATE = "\u0000", "\ud800"
BAD = pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])


@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with module_node(request, "cluster", tmp_path_factory.mktemp("hostile")) as proc:
        yield proc


@pytest.fixture
def queue() -> str:
    return f"hostile-{uuid.uuid4().hex[:10]}"


def send(node: NodeProcess, method: str, path: str, body: Any = None) -> Any:
    """*body* as JSON text with escapes (json.dumps writes \\u0000 and \\ud800 as such)."""
    content = None if body is None else json.dumps(body).encode()
    return node.http.request(method, path, content=content, headers={"Content-Type": "application/json"})


def assert_field_error(response: Any, field: str) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert body["error"] == "invalid_argument" and body["field"] == field, body
    assert any(word in body["message"] for word in ("NUL", "surrogate", "control characters")), body


def stored(node: NodeProcess, queue: str) -> list[str]:
    return [t["id"] for t in node.api("GET", f"/api/v1/tasks?queue={queue}")["tasks"]]


# -- REST -----------------------------------------------------------------------------------------

TASK_FIELDS = [
    ({"type": "a{}"}, "type"),
    ({"metadata": {"k": "v{}"}}, "metadata.k"),
    ({"metadata": {"k{}": "v"}}, "metadata"),
    ({"unique_key": "u{}"}, "unique_key"),
    ({"group": "g{}"}, "group"),
    ({"concurrency_key": "c{}"}, "concurrency_key"),
]


def fill(template: dict[str, Any], bad: str) -> dict[str, Any]:
    return json.loads(json.dumps(template).replace("{}", json.dumps(bad)[1:-1]))


@BAD
@pytest.mark.parametrize(("template", "field"), TASK_FIELDS, ids=[f for _, f in TASK_FIELDS])
def test_an_enqueue_with_unstorable_text_is_a_400_naming_the_field(node, queue, bad, template, field):
    task = {"type": "t", "queue": queue, **fill(template, bad)}

    for path, body in [("/api/v1/tasks", task), ("/api/v1/tasks/tx", {"tasks": [task]})]:
        assert_field_error(send(node, "POST", path, body), field)
    batch = send(node, "POST", "/api/v1/tasks/batch", {"tasks": [task]})
    assert batch.status_code == 200 and batch.json()["results"][0]["error"]["field"] == field, batch.text
    assert stored(node, queue) == []


def test_a_json_payload_with_a_lone_surrogate_is_refused_and_one_with_nul_is_stored_whole(node, queue):
    refused = send(node, "POST", "/api/v1/tasks", {"type": "t", "queue": queue, "json": {"k": SURROGATE}})
    assert_field_error(refused, "json")
    # A NUL in a JSON payload is a JSON escape in its bytes, which PostgreSQL stores as they are.
    kept = send(node, "POST", "/api/v1/tasks", {"type": "t", "queue": queue, "json": {"k": NUL}})
    assert kept.status_code == 201, kept.text
    assert stored(node, queue) == [kept.json()["id"]]


@BAD
def test_a_webhook_secret_or_url_with_unstorable_text_is_a_400(node, bad):
    hook = {"name": "h", "url": "https://hooks.example/x", "queues": {"q": 1}, "secrets": ["s" * 20 + bad]}
    assert_field_error(send(node, "POST", "/api/v1/webhooks", hook), "secrets[0]")
    assert_field_error(send(node, "POST", "/api/v1/webhooks", {**hook, "secrets": ["s" * 20],
                                                               "url": f"https://hooks.example/{bad}"}), "url")  # fmt: skip
    assert node.api("GET", "/api/v1/webhooks")["webhooks"] == []


@BAD
def test_a_cron_entry_with_unstorable_text_is_a_400(node, bad):
    entry = {"id": "c1", "spec": "@daily", "task_type": f"t{bad}"}
    assert_field_error(send(node, "POST", "/api/v1/cron", entry), "task_type")
    assert_field_error(send(node, "POST", "/api/v1/cron", {**entry, "task_type": "t",
                                                           "options": {"metadata": {"k": bad}}}), "metadata.k")  # fmt: skip
    assert node.api("GET", "/api/v1/cron")["entries"] == []


def test_a_cron_spec_that_never_fires_is_a_400_on_rest_and_connect(node):
    rest = send(node, "POST", "/api/v1/cron", {"id": "feb31", "spec": "0 0 31 2 *", "task_type": "t"})
    connect = send(node, "POST", "/conveyor.v1.AdminService/UpsertCron",
                   {"entry": {"id": "feb31", "spec": "0 0 31 2 *", "taskType": "t"}})  # fmt: skip

    assert rest.status_code == 400 and rest.json()["field"] == "spec", rest.text
    assert "never fires" in rest.json()["message"]
    assert connect.status_code == 400 and connect.json()["code"] == "invalid_argument", connect.text
    assert node.api("GET", "/api/v1/cron")["entries"] == []


@pytest.mark.parametrize(
    ("path", "field"),
    [("/api/v1/tasks?queue=a%00b", "queue"), ("/api/v1/tasks?state=pending%00", "state"),
     ("/api/v1/tasks?page_token=%00", "page_token"), ("/api/v1/tasks/a%00b", "task_id"),
     ("/api/v1/cron/a%00b", "entry_id"), ("/api/v1/webhooks/a%00b", "name"),
     ("/api/v1/stats/history?minutes=%00", "minutes")],
)  # fmt: skip
def test_a_nul_in_a_path_or_query_parameter_is_a_400_naming_it(node, path, field):
    response = node.http.get(path)

    assert response.status_code == 400, response.text
    assert response.json()["field"] == field and "NUL" in response.json()["message"]


def test_a_nul_in_a_task_action_path_changes_nothing(node, queue):
    task = node.enqueue(queue=queue, process_in="1h")

    response = node.http.post(f"/api/v1/tasks/{task['id']}%00/cancel")

    assert response.status_code == 400 and response.json()["field"] == "task_id", response.text
    assert node.task(task["id"])["state"] == "scheduled"


# -- Connect --------------------------------------------------------------------------------------


@BAD
@pytest.mark.parametrize(
    ("method", "body"),
    [("TaskService/GetTask", {"id": "x{}"}), ("AdminService/CancelTask", {"id": "x{}"}),
     ("AdminService/PauseCron", {"id": "x{}"}), ("TaskService/Enqueue", {"type": "t", "metadata": {"k": "{}"}}),
     ("AdminService/UpsertWebhookWorker", {"worker": {"name": "h", "url": "https://hooks.example/x",
                                                      "queues": {"q": 1}, "secrets": ["s{}" + "s" * 20]}})],
)  # fmt: skip
def test_connect_ids_and_secrets_with_unstorable_text_are_invalid_argument(node, bad, method, body):
    response = send(node, "POST", f"/conveyor.v1.{method}", fill(body, bad))

    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_argument" and set(response.json()) == {"code", "message"}
    assert node.api("GET", "/api/v1/webhooks")["webhooks"] == []


# -- static files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/static/%2e%2e/%2e%2e/etc/passwd", "/static/%2e%2e/conveyor_site/settings.py",
                                  "/static/a%00b.css"])  # fmt: skip
def test_a_static_path_outside_the_static_roots_is_a_404(node, path):
    response = node.http.get(path)

    assert response.status_code == 404, response.text[:300]


# -- the worker WebSocket -------------------------------------------------------------------------


class Raw:
    """A hand-written worker on one WebSocket (frames as JSON text, escapes and all)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    def send(self, frame: dict[str, Any]) -> None:
        self.ws.send(json.dumps(frame))

    def frame(self, kind: str) -> dict[str, Any]:
        while True:
            data = json.loads(self.ws.recv(timeout=20))
            for frame in data if isinstance(data, list) else [data]:
                if frame["type"] == kind:
                    return frame
                assert frame["type"] == p.PING, frame

    def ending(self) -> tuple[list[dict[str, Any]], int | None]:
        frames: list[dict[str, Any]] = []
        try:
            while True:
                data = json.loads(self.ws.recv(timeout=20))
                frames.extend(data if isinstance(data, list) else [data])
        except ConnectionClosed:
            pass
        return frames, self.ws.close_code


@pytest.fixture
def raw(node: NodeProcess) -> Iterator[Any]:
    with contextlib.ExitStack() as stack:
        url = node.url.replace("http", "ws", 1) + p.WORKER_PATH
        yield lambda: Raw(stack.enter_context(ws_connect(url, open_timeout=10)))


def sessions_on(node: NodeProcess, queue: str) -> list[dict[str, Any]]:
    return [w for w in node.api("GET", "/api/v1/workers")["workers"] if queue in w["queues"]]


@BAD
@pytest.mark.parametrize(("outcome", "state", "retried"), [(p.SKIP_RETRY, "archived", 0), (p.RETRY, "retry", 1)])
def test_a_worker_error_with_unstorable_text_keeps_its_outcome(node, raw, queue, bad, outcome, state, retried):
    worker = raw()
    worker.send({"type": p.HELLO, "queues": {queue: 1}, "concurrency": 1})
    worker.frame(p.WELCOME)
    task = node.enqueue(queue=queue, max_retry=5, retry_policy={"kind": "fixed", "base": "1h"})
    dispatch = worker.frame(p.DISPATCH)

    worker.send({"type": p.RESULT, "task_id": task["id"], "lease_id": dispatch["lease_id"], "outcome": outcome,
                 "error": f"boom {bad} at line 3"})  # fmt: skip

    settled = wait_for(lambda: (t := node.task(task["id"]))["state"] != "active" and t, 20, what="the outcome")
    assert (settled["state"], settled["retried"]) == (state, retried)
    assert settled["last_error"] == "boom \ufffd at line 3"


@BAD
def test_progress_with_unstorable_text_is_recorded_scrubbed(node, raw, queue, bad):
    worker = raw()
    worker.send({"type": p.HELLO, "queues": {queue: 1}, "concurrency": 1})
    worker.frame(p.WELCOME)
    task = node.enqueue(queue=queue)
    worker.frame(p.DISPATCH)

    worker.send({"type": p.PROGRESS, "task_id": task["id"], "percent": 40, "message": f"half{bad}way"})

    seen = wait_for(lambda: (t := node.task(task["id"]))["progress"] == 40 and t, 20, what="progress")
    assert seen["progress_message"] == "half\ufffdway"


@BAD
@pytest.mark.parametrize(
    "hello", [{"labels": {"zone": "a{}"}}, {"labels": {"zo{}ne": "a"}}, {"batch_types": ["t{}"]},
              {"sdk_version": "0.3{}"}],
    ids=["label-value", "label-key", "batch-type", "sdk-version"],
)  # fmt: skip
def test_a_hello_with_unstorable_text_is_refused_and_no_hidden_worker_takes_tasks(node, raw, queue, bad, hello):
    worker = raw()
    worker.send({"type": p.HELLO, "queues": {queue: 1}, "concurrency": 1, **fill(hello, bad)})

    frames, code = worker.ending()

    assert code == p.CLOSE_PROTOCOL_ERROR
    (error,) = [f for f in frames if f["type"] == p.ERROR]
    assert error["code"] == "invalid_frame" and "hello:" in error["message"]
    assert not any(f["type"] == p.WELCOME for f in frames)
    # No session took the queue: a task stays pending, and no worker is listed for it.
    task = node.enqueue(queue=queue)
    assert node.task(task["id"])["state"] == "pending" and sessions_on(node, queue) == []


def test_a_hello_with_a_version_longer_than_its_column_is_refused(node, raw, queue):
    worker = raw()
    worker.send({"type": p.HELLO, "queues": {queue: 1}, "concurrency": 1, "sdk_version": "1." * 40})

    frames, code = worker.ending()

    assert code == p.CLOSE_PROTOCOL_ERROR and "at most 64" in frames[-1]["message"]
    assert sessions_on(node, queue) == []


def test_a_hello_with_ordinary_labels_is_listed(node, raw, queue):
    worker = raw()
    worker.send({"type": p.HELLO, "queues": {queue: 1}, "concurrency": 1, "labels": {"zone": "eu-1 \u00e9\U0001f600"}})
    worker.frame(p.WELCOME)

    listed = wait_for(lambda: sessions_on(node, queue), 20, what="the session row")
    assert listed[0]["labels"] == {"zone": "eu-1 \u00e9\U0001f600"}
