"""Scoped API tokens on every in-process surface: REST (views and the enqueue
fast path), Connect, /ws/events, SSE, /metrics and the webhook callbacks.

Each token below grants one scope; a refused call is 403 naming the scope
it lacks (or the queue it may not use) and changes nothing. The worker
WebSocket and the streams of a running node are in test_scopes_live.py.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from conveyor.models import Task
from conveyor.webhooks.tokens import mint
from conveyor_site.asgi import application
from tests.api.conftest import Api, connect_refused, enqueue, lease, ok, refused, state_of_everything
from tests.api.test_auth import CONNECT_WRITES, MUTATIONS, PRODUCERS, READS, setup  # noqa: F401  (setup: a fixture)
from tests.connect.clients import post

pytestmark = pytest.mark.django_db(transaction=True)

BY_SCOPE = {"produce": "tok-produce", "consume": "tok-consume", "read": "tok-read", "admin": "tok-admin"}
LEGACY = "tok-legacy"  # a plain string: every scope, as before scopes existed
LIMITED = "tok-q1-producer"  # produce, into q1 only
TOKENS = [
    LEGACY,
    *({"token": token, "scopes": [scope]} for scope, token in BY_SCOPE.items()),
    {"token": LIMITED, "scopes": ["produce"], "queues": ["q1"], "name": "q1-app"},
]
CONNECT_READS = ["ListQueues", "ListTasks", "BrokerInfo", "ListCron", "ListWebhookWorkers", "ClusterInfo"]
TASK_RPCS = [
    ("Enqueue", {"type": "x", "queue": "q1"}),
    ("EnqueueBatch", {"tasks": [{"type": "x", "queue": "q1"}]}),
    ("EnqueueTx", {"tasks": [{"type": "x", "queue": "q1"}]}),
]


@pytest.fixture
def scoped(setup):  # noqa: F811  (after setup: it creates what the calls act on without a token)
    with override_settings(CONVEYOR={"API_TOKENS": TOKENS}):
        yield


def others(*granted: str) -> list[str]:
    return [scope for scope in BY_SCOPE if scope not in granted]


def lacks(response, scope: str) -> dict:
    body = refused(response, 403, "permission_denied")
    assert body["scope"] == scope and f"'{scope}'" in body["message"], body
    return body


def succeeded(response) -> None:
    assert 200 <= response.status_code < 300, f"{response.status_code}: {response.content[:300]!r}"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# -- REST --------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", others("admin"))
@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS, ids=[f"{m} {p}" for m, p, _ in MUTATIONS])
def test_rest_admin_calls_need_the_admin_scope_and_a_refusal_changes_nothing(scoped, scope, method, path, body):
    before = state_of_everything()
    lacks(getattr(Api(BY_SCOPE[scope]), method)(path, body), "admin")
    assert state_of_everything() == before


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS, ids=[f"{m} {p}" for m, p, _ in MUTATIONS])
def test_rest_admin_calls_are_served_with_the_admin_scope(scoped, method, path, body):
    succeeded(getattr(Api(BY_SCOPE["admin"]), method)(path, body))


@pytest.mark.parametrize("scope", ["produce", "consume"])
@pytest.mark.parametrize("path", [p for p in READS if p != "/api/v1/tasks/t1"])
def test_rest_reads_need_the_read_scope(scoped, scope, path):
    lacks(Api(BY_SCOPE[scope]).get(path), "read")


@pytest.mark.parametrize("scope", ["read", "admin"])
@pytest.mark.parametrize("path", READS)
def test_rest_reads_are_served_with_read_or_admin(scoped, scope, path):
    ok(Api(BY_SCOPE[scope]).get(path))


def test_rest_one_task_is_readable_with_produce_but_not_consume(scoped):
    assert ok(Api(BY_SCOPE["produce"]).get("/api/v1/tasks/t1"))["id"] == "t1"
    lacks(Api(BY_SCOPE["consume"]).get("/api/v1/tasks/t1"), "read")


@pytest.mark.parametrize("scope", others("produce"))
@pytest.mark.parametrize(("path", "body", "status"), PRODUCERS)
def test_rest_enqueues_need_the_produce_scope(scoped, scope, path, body, status):
    before = state_of_everything()
    lacks(Api(BY_SCOPE[scope]).post(path, body), "produce")
    assert state_of_everything() == before


@pytest.mark.parametrize(("path", "body", "status"), PRODUCERS)
def test_rest_enqueues_are_served_with_produce(scoped, path, body, status):
    ok(Api(BY_SCOPE["produce"]).post(path, body), status)


def test_rest_a_legacy_token_keeps_every_scope(scoped):
    api = Api(LEGACY)
    ok(api.post("/api/v1/tasks", {"type": "x"}), 201)
    ok(api.get("/api/v1/queues"))
    ok(api.post("/api/v1/queues/q1/pause"))


def test_rest_scope_is_checked_before_read_only_mode(setup):  # noqa: F811
    with override_settings(CONVEYOR={"API_TOKENS": TOKENS, "READ_ONLY": True}):
        lacks(Api(BY_SCOPE["read"]).post("/api/v1/queues/q1/pause"), "admin")
        body = refused(Api(BY_SCOPE["admin"]).post("/api/v1/queues/q1/pause"), 403, "permission_denied")
        assert "read-only" in body["message"]


# -- REST: a producer limited to queue q1 --------------------------------------------------

LIMITED_OK = [
    ("/api/v1/tasks", {"type": "x", "queue": "q1"}, 201),
    ("/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}] * 2}, 200),
    ("/api/v1/tasks/tx", {"tasks": [{"type": "x", "queue": "q1"}] * 2}, 201),
]
LIMITED_REFUSED = [
    ("/api/v1/tasks", {"type": "x", "queue": "q2"}, "q2"),
    ("/api/v1/tasks", {"type": "x"}, "default"),  # no queue: the default queue, which it may not use
    ("/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x", "queue": "q2"}]}, "q2"),
    ("/api/v1/tasks/tx", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x"}]}, "default"),
]


@pytest.mark.parametrize(("path", "body", "status"), LIMITED_OK)
def test_rest_a_queue_limited_producer_enqueues_into_its_queue(scoped, path, body, status):
    ok(Api(LIMITED).post(path, body), status)
    assert set(Task.objects.exclude(id="t1").values_list("queue", flat=True)) == {"q1"}


@pytest.mark.parametrize(("path", "body", "queue"), LIMITED_REFUSED)
def test_rest_a_queue_limited_producer_is_refused_another_queue_and_nothing_is_stored(scoped, path, body, queue):
    before = state_of_everything()
    answer = refused(Api(LIMITED).post(path, body), 403, "permission_denied")
    assert answer["queue"] == queue and "q1" in answer["message"], answer
    assert state_of_everything() == before


def test_rest_a_queue_limited_producer_reads_its_queues_tasks_and_no_others(scoped, broker):
    enqueue(broker, id="t2", queue="q2")
    assert ok(Api(LIMITED).get("/api/v1/tasks/t1"))["id"] == "t1"
    hidden = refused(Api(LIMITED).get("/api/v1/tasks/t2"), 404, "not_found")
    missing = refused(Api(LIMITED).get("/api/v1/tasks/t3"), 404, "not_found")
    assert hidden["message"].replace("t2", "t3") == missing["message"]  # as if it did not exist


# -- the enqueue fast path (the ASGI application, in front of Django) ---------------------

FAST = [("/api/v1/tasks", {"type": "x", "queue": "q1"}, 201), ("/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}]}, 200)]  # fmt: skip


@pytest.mark.parametrize("scope", others("produce"))
@pytest.mark.parametrize(("path", "body", "status"), FAST)
def test_fast_path_enqueues_need_the_produce_scope(scoped, scope, path, body, status):
    before = state_of_everything()
    lacks(post(path, json.dumps(body), **bearer(BY_SCOPE[scope])), "produce")
    assert state_of_everything() == before
    ok(post(path, json.dumps(body), **bearer(BY_SCOPE["produce"])), status)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/tasks", {"type": "x", "queue": "q2"}),
        ("/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x", "queue": "q2"}]}),
    ],
)
def test_fast_path_refuses_a_queue_limited_producer_another_queue(scoped, path, body):
    before = state_of_everything()
    answer = refused(post(path, json.dumps(body), **bearer(LIMITED)), 403, "permission_denied")
    assert answer["queue"] == "q2"
    assert state_of_everything() == before


# -- Connect -----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", others("produce"))
@pytest.mark.parametrize(("method", "body"), TASK_RPCS, ids=[m for m, _ in TASK_RPCS])
def test_connect_enqueues_need_the_produce_scope(scoped, scope, method, body):
    before = state_of_everything()
    answer = connect_refused(Api(BY_SCOPE[scope]).connect("TaskService", method, body), 403, "permission_denied")
    assert "'produce'" in answer["message"]
    assert state_of_everything() == before
    ok(Api(BY_SCOPE["produce"]).connect("TaskService", method, body))


@pytest.mark.parametrize("scope", ["produce", "read", "admin"])
def test_connect_get_task_is_served_with_produce_or_read(scoped, scope):
    assert ok(Api(BY_SCOPE[scope]).connect("TaskService", "GetTask", {"id": "t1"}))["task"]["id"] == "t1"


def test_connect_get_task_is_refused_to_a_consume_token(scoped):
    connect_refused(Api(BY_SCOPE["consume"]).connect("TaskService", "GetTask", {"id": "t1"}), 403, "permission_denied")


@pytest.mark.parametrize("scope", others("admin"))
@pytest.mark.parametrize(("method", "body"), CONNECT_WRITES, ids=[m for m, _ in CONNECT_WRITES])
def test_connect_admin_writes_need_the_admin_scope(scoped, scope, method, body):
    before = state_of_everything()
    answer = connect_refused(Api(BY_SCOPE[scope]).connect("AdminService", method, body), 403, "permission_denied")
    assert "'admin'" in answer["message"]
    assert state_of_everything() == before


@pytest.mark.parametrize(("method", "body"), CONNECT_WRITES, ids=[m for m, _ in CONNECT_WRITES])
def test_connect_admin_writes_are_served_with_admin(scoped, method, body):
    ok(Api(BY_SCOPE["admin"]).connect("AdminService", method, body))


@pytest.mark.parametrize("scope", ["produce", "consume"])
@pytest.mark.parametrize("method", CONNECT_READS)
def test_connect_admin_reads_need_the_read_scope(scoped, scope, method):
    answer = connect_refused(Api(BY_SCOPE[scope]).connect("AdminService", method, {}), 403, "permission_denied")
    assert "'read'" in answer["message"]


@pytest.mark.parametrize("scope", ["read", "admin"])
@pytest.mark.parametrize("method", CONNECT_READS)
def test_connect_admin_reads_are_served_with_read_or_admin(scoped, scope, method):
    ok(Api(BY_SCOPE[scope]).connect("AdminService", method, {}))


def test_connect_a_legacy_token_keeps_every_scope(scoped):
    api = Api(LEGACY)
    ok(api.connect("TaskService", "Enqueue", {"type": "x"}))
    ok(api.connect("AdminService", "PauseQueue", {"queue": "q1"}))


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("Enqueue", {"type": "x", "queue": "q2"}),
        ("Enqueue", {"type": "x"}),
        ("EnqueueBatch", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x", "queue": "q2"}]}),
        ("EnqueueTx", {"tasks": [{"type": "x", "queue": "q2"}]}),
    ],
)
def test_connect_refuses_a_queue_limited_producer_another_queue(scoped, method, body):
    before = state_of_everything()
    answer = connect_refused(Api(LIMITED).connect("TaskService", method, body), 403, "permission_denied")
    assert "may only enqueue into queues q1, not" in answer["message"]
    assert state_of_everything() == before


def test_connect_a_queue_limited_producer_reads_only_its_queues_tasks(scoped, broker):
    enqueue(broker, id="t2", queue="q2")
    ok(Api(LIMITED).connect("TaskService", "Enqueue", {"type": "x", "queue": "q1"}))
    assert ok(Api(LIMITED).connect("TaskService", "GetTask", {"id": "t1"}))["task"]["id"] == "t1"
    connect_refused(Api(LIMITED).connect("TaskService", "GetTask", {"id": "t2"}), 404, "not_found")


# -- webhook callbacks: the lease token alone ---------------------------------------------


@pytest.mark.parametrize("token", [None, "produce", "consume"])
def test_webhook_callbacks_take_the_lease_token_whatever_api_token_comes_along(scoped, broker, token):
    enqueue(broker, id="hook-1", queue="hooks")
    task = lease(broker, "hooks")
    headers = bearer(BY_SCOPE[token]) if token else {}
    lease_token = mint(task.id, task.lease_id)
    ok(post("/conveyor.v1.WebhookService/Heartbeat", json.dumps({"leaseToken": lease_token}), **headers))
    body = {"leaseToken": lease_token, "outcome": "TASK_OUTCOME_SUCCESS"}
    ok(post("/conveyor.v1.WebhookService/ReportResult", json.dumps(body), **headers))
    assert Task.objects.get(id="hook-1").state == "completed"


# -- /ws/events and SSE -------------------------------------------------------------------


async def _events_socket(token: str) -> tuple[list[dict], int | None]:
    """Connect to /ws/events; the messages before the server closed and its code (None: still open)."""
    communicator = WebsocketCommunicator(
        application, "/ws/events", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    connected, _ = await communicator.connect()
    assert connected
    messages, code = [], None
    while not await communicator.receive_nothing(timeout=0.3):
        output = await communicator.receive_output()
        if output["type"] == "websocket.close":
            code = output.get("code")
            break
        messages.append(json.loads(output["text"]))
    await communicator.disconnect()
    return messages, code


@pytest.mark.parametrize("scope", ["produce", "consume"])
def test_events_websocket_needs_the_read_scope_and_closes_4403(scoped, scope):
    messages, code = async_to_sync(_events_socket)(BY_SCOPE[scope])
    assert [m["error"] for m in messages] == ["permission_denied"] and "'read'" in messages[0]["message"]
    assert code == 4403


@pytest.mark.parametrize("token", [BY_SCOPE["read"], BY_SCOPE["admin"], LEGACY])
def test_events_websocket_stays_open_with_read_admin_or_a_legacy_token(scoped, token):
    assert async_to_sync(_events_socket)(token) == ([], None)


@pytest.mark.parametrize("scope", ["produce", "consume"])
def test_sse_needs_the_read_scope(scoped, scope):
    lacks(Api().client.get("/api/v1/events", HTTP_AUTHORIZATION=f"Bearer {BY_SCOPE[scope]}"), "read")


# -- /metrics ----------------------------------------------------------------------------


@pytest.fixture
def metrics_auth(setup):  # noqa: F811
    with override_settings(CONVEYOR={"API_TOKENS": TOKENS, "METRICS_AUTH": True}):
        yield


def metrics(token: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return Api().client.get("/metrics", **headers)


@pytest.mark.parametrize("token", [None, "wrong"])
def test_metrics_with_metrics_auth_need_a_token(metrics_auth, token):
    response = metrics(token)
    refused(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="conveyor"'


@pytest.mark.parametrize("scope", ["produce", "consume"])
def test_metrics_with_metrics_auth_need_the_read_scope(metrics_auth, scope):
    lacks(metrics(BY_SCOPE[scope]), "read")


@pytest.mark.parametrize("token", [BY_SCOPE["read"], BY_SCOPE["admin"], LEGACY])
def test_metrics_with_metrics_auth_are_served_to_read_admin_and_legacy_tokens(metrics_auth, token):
    response = metrics(token)
    assert response.status_code == 200 and b"conveyor_pending_tasks" in response.content


def test_metrics_stay_open_without_metrics_auth(scoped):
    assert metrics().status_code == 200
