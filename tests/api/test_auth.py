"""Bearer tokens, staff sessions and read-only mode on every HTTP surface."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.test import override_settings

from conveyor.models import Task
from conveyor_site.asgi import application
from tests.api.conftest import TOKEN, Api, connect_refused, enqueue, ok, refused, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)

# Every REST mutation, each with a body that succeeds outside read-only mode.
# (setup() below creates the task "t1", cron entry "c1", webhook "w1" they act on.)
MUTATIONS = [
    ("post", "/api/v1/tasks/t1/cancel", None),
    ("post", "/api/v1/tasks/t1/run", None),
    ("post", "/api/v1/tasks/t1/archive", None),
    ("post", "/api/v1/tasks/t1/reschedule", {"process_in": "1h"}),
    ("delete", "/api/v1/tasks/t1", None),
    ("post", "/api/v1/tasks/actions/cancel", {"ids": ["t1"]}),
    ("post", "/api/v1/tasks/actions/run", {"ids": ["t1"]}),
    ("post", "/api/v1/tasks/actions/archive", {"ids": ["t1"]}),
    ("post", "/api/v1/tasks/actions/delete", {"ids": ["t1"]}),
    ("post", "/api/v1/tasks/actions/reschedule", {"ids": ["t1"], "process_in": "1h"}),
    ("post", "/api/v1/queues/q1/pause", None),
    ("post", "/api/v1/queues/q1/resume", None),
    ("put", "/api/v1/queues/q1/policy", {"policy": "lifo"}),
    ("put", "/api/v1/queues/q1/rate-limit", {"rate": 9}),
    ("delete", "/api/v1/queues/q1/rate-limit", None),
    ("put", "/api/v1/queues/q1/concurrency-limit", {"limit": 9}),
    ("delete", "/api/v1/queues/q1/concurrency-limit", None),
    ("put", "/api/v1/groups", {"queue": "q1", "max_size": 9}),
    ("delete", "/api/v1/groups?queue=q1", None),
    ("post", "/api/v1/cron", {"id": "c2", "spec": "@daily", "task_type": "t"}),
    ("put", "/api/v1/cron/c1", {"spec": "@hourly", "task_type": "t"}),
    ("delete", "/api/v1/cron/c1", None),
    ("post", "/api/v1/cron/c1/pause", None),
    ("post", "/api/v1/cron/c1/resume", None),
    ("post", "/api/v1/webhooks", {"name": "w2", "url": "https://x.example.com/", "queues": {"q": 1}}),
    ("put", "/api/v1/webhooks/w1", {"url": "https://y.example.com/", "queues": {"q": 1}}),
    ("delete", "/api/v1/webhooks/w1", None),
    ("post", "/api/v1/webhooks/w1/pause", None),
    ("post", "/api/v1/webhooks/w1/resume", None),
]
PRODUCERS = [
    ("/api/v1/tasks", {"type": "p"}, 201),
    ("/api/v1/tasks/batch", {"tasks": [{"type": "p"}]}, 200),
    ("/api/v1/tasks/tx", {"tasks": [{"type": "p"}]}, 201),
]
READS = [
    "/api/v1/tasks",
    "/api/v1/tasks/t1",
    "/api/v1/queues",
    "/api/v1/limits",
    "/api/v1/groups",
    "/api/v1/cron",
    "/api/v1/cron/c1",
    "/api/v1/webhooks",
    "/api/v1/webhooks/w1",
    "/api/v1/workers",
    "/api/v1/cluster",
    "/api/v1/info",
]
CONNECT_WRITES = [
    ("PauseQueue", {"queue": "q1"}),
    ("ResumeQueue", {"queue": "q1"}),
    ("SetQueueRateLimit", {"queue": "q1", "ratePerSec": 3, "burst": 1}),
    ("DeleteQueueRateLimit", {"queue": "q1"}),
    ("SetQueueConcurrencyLimit", {"queue": "q1", "maxActive": 3}),
    ("DeleteQueueConcurrencyLimit", {"queue": "q1"}),
    ("SetGroupConfig", {"queue": "q1", "maxSize": 3}),
    ("DeleteGroupConfig", {"queue": "q1"}),
    ("CancelTask", {"id": "t1"}),
    ("DeleteTask", {"id": "t1"}),
    ("RunTask", {"id": "t1"}),
    ("RescheduleTask", {"id": "t1", "processIn": "3600s"}),
    ("ArchiveTask", {"id": "t1"}),
    ("BatchCancelTasks", {"ids": ["t1"]}),
    ("BatchDeleteTasks", {"ids": ["t1"]}),
    ("BatchRunTasks", {"ids": ["t1"]}),
    ("BatchArchiveTasks", {"ids": ["t1"]}),
    ("UpsertCron", {"entry": {"id": "c2", "spec": "@daily", "taskType": "t"}}),
    ("PauseCron", {"id": "c1"}),
    ("ResumeCron", {"id": "c1"}),
    ("DeleteCron", {"id": "c1"}),
    ("UpsertWebhookWorker", {"worker": {"name": "w2", "url": "https://x.example.com/", "queues": {"q": 1}}}),
    ("PauseWebhookWorker", {"name": "w1"}),
    ("ResumeWebhookWorker", {"name": "w1"}),
    ("DeleteWebhookWorker", {"name": "w1"}),
]


@pytest.fixture
def setup(broker):
    enqueue(broker, id="t1", queue="q1")
    broker.set_rate_limit("q1", 5, 1)
    broker.set_concurrency_limit("q1", 2)
    broker.set_group_config("q1", "", max_size=5)
    Api().post("/api/v1/cron", {"id": "c1", "spec": "@daily", "task_type": "t"})
    Api().post("/api/v1/webhooks", {"name": "w1", "url": "https://w.example.com/", "queues": {"q": 1}})


# -- tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Bearer ", "Basic YTpi", TOKEN])
@pytest.mark.parametrize(("method", "path", "body"), [("get", "/api/v1/tasks", None), ("post", "/api/v1/tasks", {"type": "x"}),
                                                      ("delete", "/api/v1/tasks/t1", None), ("get", "/api/v1/info", None)])  # fmt: skip
def test_rest_without_a_valid_token_is_401_with_a_bearer_challenge(tokens, setup, method, path, body, header):
    api = Api()
    headers = {"HTTP_AUTHORIZATION": header} if header and header != TOKEN else {}
    before = state_of_everything()
    if method == "get":
        response = api.client.get(path, **headers)
    else:
        response = api.call(method, path, body, token="", **headers)
    refused(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="conveyor"'
    assert state_of_everything() == before


def test_rest_with_any_configured_token_is_served(tokens, setup):
    for token in (TOKEN, "second-token"):
        assert [t["id"] for t in ok(Api(token).get("/api/v1/tasks"))["tasks"]] == ["t1"]
    ok(Api(TOKEN).post("/api/v1/tasks", {"type": "x"}), 201)
    ok(Api(TOKEN).call("GET", "/api/v1/tasks", HTTP_AUTHORIZATION=f"bearer   {TOKEN}  "))  # scheme case-insensitive


def test_without_configured_tokens_auth_is_off(setup):
    ok(Api().get("/api/v1/tasks"))
    ok(Api("anything").get("/api/v1/tasks"))


def test_a_staff_session_is_served_and_a_non_staff_one_is_403(tokens, setup):
    staff = Api()
    op = User.objects.create_user("op", is_staff=True)
    op.user_permissions.set(Permission.objects.filter(codename__in=["view_task", "change_task"]))
    staff.client.force_login(op)
    ok(staff.get("/api/v1/tasks"))
    ok(staff.post("/api/v1/tasks/t1/archive"))
    plain = Api()
    plain.client.force_login(User.objects.create_user("visitor"))
    before = state_of_everything()
    refused(plain.get("/api/v1/tasks"), 403, "permission_denied")
    refused(plain.post("/api/v1/tasks/t1/run"), 403, "permission_denied")
    assert state_of_everything() == before


@pytest.mark.parametrize("token", [None, "wrong"])
@pytest.mark.parametrize(("service", "method", "body"), [("TaskService", "Enqueue", {"type": "x"}), ("TaskService", "GetTask", {"id": "t1"}),
                                                         ("AdminService", "ListQueues", {}), ("AdminService", "PauseQueue", {"queue": "q1"})])  # fmt: skip
def test_connect_without_a_valid_token_is_unauthenticated(tokens, setup, service, method, body, token):
    before = state_of_everything()
    connect_refused(Api(token).connect(service, method, body), 401, "unauthenticated")
    assert state_of_everything() == before


def test_connect_with_a_token_is_served(tokens, setup):
    assert ok(Api(TOKEN).connect("TaskService", "GetTask", {"id": "t1"}))["task"]["id"] == "t1"


def test_webhook_service_needs_no_api_token_but_refuses_a_bad_lease_token(tokens):
    connect_refused(Api().connect("WebhookService", "Heartbeat", {"leaseToken": "nope"}), 401, "unauthenticated")


@pytest.mark.parametrize("header", [None, "Bearer wrong"])
def test_sse_without_a_valid_token_is_401(tokens, header):
    headers = {"HTTP_AUTHORIZATION": header} if header else {}
    response = Api().client.get("/api/v1/events", **headers)
    refused(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="conveyor"'


def test_health_metrics_and_schema_are_open_without_a_token(tokens):
    api = Api()
    assert api.client.get("/healthz").status_code == 200
    assert api.client.get("/metrics").status_code == 200
    assert api.client.get("/api/v1/schema").status_code == 200


async def _events_socket(headers: list[tuple[bytes, bytes]]) -> tuple[bool, list[str], int | None]:
    """Connect to /ws/events; return (accepted, text messages, close code)."""
    communicator = WebsocketCommunicator(application, "/ws/events?queue=a", headers=headers)
    connected, _ = await communicator.connect()
    messages, code = [], None
    if connected:
        while True:
            output = await communicator.receive_output(timeout=2)
            if output["type"] == "websocket.close":
                code = output.get("code")
                break
            messages.append(output["text"])
            if output["type"] == "websocket.send" and not messages[-1].startswith('{"error"'):
                break
    await communicator.disconnect()
    return connected, messages, code


@pytest.mark.parametrize("header", [None, b"Bearer wrong"])
def test_events_websocket_without_a_valid_token_says_why_and_closes_4401(tokens, header):
    headers = [(b"authorization", header)] if header else []
    connected, messages, code = async_to_sync(_events_socket)(headers)
    assert connected  # accepted first, so the reason and the code reach the client
    assert [json.loads(m)["error"] for m in messages] == ["unauthenticated"]
    assert code == 4401


def test_events_websocket_with_a_token_stays_open(tokens):
    async def check() -> bool:
        communicator = WebsocketCommunicator(
            application, "/ws/events", headers=[(b"authorization", f"Bearer {TOKEN}".encode())]
        )
        connected, _ = await communicator.connect()
        silent = await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return connected and silent

    assert async_to_sync(check)()


# -- read-only ---------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS, ids=[f"{m} {p}" for m, p, _ in MUTATIONS])
def test_read_only_refuses_each_rest_mutation_with_403_and_changes_nothing(setup, method, path, body):
    api = Api()
    before = state_of_everything()
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        body_403 = refused(getattr(api, method)(path, body), 403, "permission_denied")
    assert "read-only" in body_403["message"]
    assert state_of_everything() == before
    # The same request is accepted once the server is writable again.
    response = getattr(api, method)(path, body)
    assert 200 <= response.status_code < 300, response.content


@pytest.mark.parametrize("path", READS)
def test_read_only_serves_reads(setup, read_only, path):
    ok(Api().get(path))


@pytest.mark.parametrize(("path", "body", "status"), PRODUCERS)
def test_read_only_still_accepts_enqueues(read_only, path, body, status):
    ok(Api().post(path, body), status)
    assert Task.objects.count() == 1


@pytest.mark.parametrize(("method", "body"), CONNECT_WRITES, ids=[m for m, _ in CONNECT_WRITES])
def test_read_only_refuses_each_connect_admin_write(setup, method, body):
    api = Api()
    before = state_of_everything()
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        connect_refused(api.connect("AdminService", method, body), 403, "permission_denied")
    assert state_of_everything() == before
    ok(api.connect("AdminService", method, body))


@pytest.mark.parametrize("method", ["Enqueue", "EnqueueBatch", "EnqueueTx"])
def test_read_only_still_accepts_connect_enqueues(read_only, method):
    body = {"type": "x"} if method == "Enqueue" else {"tasks": [{"type": "x"}]}
    ok(Api().connect("TaskService", method, body))
    assert Task.objects.count() == 1


@pytest.mark.parametrize(
    "method", ["ListQueues", "ListTasks", "BrokerInfo", "ListCron", "ListWebhookWorkers", "ClusterInfo"]
)
def test_read_only_serves_connect_reads(setup, read_only, method):
    ok(Api().connect("AdminService", method, {}))
