"""The Connect protocol on the wire, as curl and third-party clients send it:
proto3 JSON (either field name, enums by name or number, Duration and
Timestamp strings), binary bodies, errors, auth and read-only mode."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from conveyor.models import Task, TaskDependency
from conveyor.v1 import service_pb2 as pb
from conveyor.webhooks.tokens import mint
from tests.api.conftest import TOKEN, enqueue, lease, state_of_everything
from tests.connect.conftest import post, refused

pytestmark = pytest.mark.django_db(transaction=True)

SEED_ENQUEUE = '{"queue":"email","type":"email:send","payload":"eyJ0byI6ImFAYi5jIn0=","contentType":"application/json"}'


def call(service: str, method: str, body: object, **headers: str) -> dict:
    response = post(f"/conveyor.v1.{service}/{method}", json.dumps(body), **headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def test_the_seed_quick_start_enqueue_is_accepted_verbatim():
    response = post("/conveyor.v1.TaskService/Enqueue", SEED_ENQUEUE)
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert (task["queue"], task["type"], task["contentType"], task["state"]) == (
        "email", "email:send", "application/json", "TASK_STATE_PENDING",
    )  # fmt: skip
    assert base64.b64decode(task["payload"]) == b'{"to":"a@b.c"}'
    assert bytes(Task.objects.get(id=task["id"]).payload) == b'{"to":"a@b.c"}'


def every_field(task_id_key: str, parent: str) -> dict:
    """An EnqueueRequest in proto3 JSON setting every field of the message."""
    return {
        task_id_key: "01J0000000000000000000FULL",
        "queue": "reports",
        "type": "report:build",
        "payload": base64.b64encode(b"\x00\x01binary").decode(),
        "contentType": "application/octet-stream",
        "metadata": {"traceparent": "00-abc-def-01", "tenant": "42"},
        "maxRetry": 7,
        "timeout": "90s",
        "deadline": "2100-01-02T03:04:05Z",
        "processAt": "2099-06-01T12:00:00.250Z",
        "uniqueKey": "report-42",
        "uniqueTtl": "3600s",
        "priority": 8,
        "retention": "86400s",
        "expiresAt": "2100-01-01T00:00:00Z",
        "dependsOn": [{"taskId": parent, "onFailure": "DEPENDENCY_FAILURE_POLICY_CONTINUE"}],
        "concurrencyKey": "tenant:42",
        "retryPolicy": {"strategy": "RETRY_STRATEGY_FIXED", "base": "2.5s", "max": "60s"},
    }


@pytest.mark.parametrize("task_id_key", ["taskId", "task_id"])
def test_an_enqueue_request_setting_every_field_stores_each_option(broker, task_id_key):
    parent = enqueue(broker, id="01J0000000000000000000PRNT")
    task = call("TaskService", "Enqueue", every_field(task_id_key, parent.id))["task"]
    assert task["id"] == "01J0000000000000000000FULL"
    s = Task.objects.get(id=task["id"])
    assert (s.queue, s.type, bytes(s.payload), s.content_type) == (
        "reports", "report:build", b"\x00\x01binary", "application/octet-stream",
    )  # fmt: skip
    assert s.metadata == {"traceparent": "00-abc-def-01", "tenant": "42"}
    assert (s.max_retry, s.timeout, s.priority, s.retention) == (7, 90.0, 8, 86400.0)
    assert s.deadline == datetime(2100, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert s.due_at == datetime(2099, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)
    assert s.unique_key == "report-42"
    assert s.unique_until - s.enqueued_at == timedelta(hours=1)
    assert s.expires_at == datetime(2100, 1, 1, tzinfo=UTC)
    assert s.concurrency_key == "tenant:42"
    assert (s.retry_kind, s.retry_base, s.retry_cap) == ("fixed", 2.5, 60.0)
    (edge,) = TaskDependency.objects.filter(task_id=s.id)
    assert (edge.depends_on_id, edge.on_failure) == (parent.id, "continue")
    assert task["state"] == "TASK_STATE_BLOCKED"


def test_group_process_in_and_expires_in_the_fields_every_field_leaves_out(broker):
    task = call("TaskService", "Enqueue", {"type": "g", "group": "batch-1"})["task"]
    assert (task["state"], Task.objects.get(id=task["id"]).group) == ("TASK_STATE_AGGREGATING", "batch-1")
    task = call("TaskService", "Enqueue", {"type": "x", "process_in": "30s", "expires_in": "3600s"})
    stored = Task.objects.get(id=task["task"]["id"])
    assert stored.due_at - stored.enqueued_at == timedelta(seconds=30)
    assert stored.expires_at - stored.enqueued_at == timedelta(hours=1)


def test_enums_by_number_and_integers_as_strings():
    task = call("TaskService", "Enqueue", {"type": "x", "priority": "6", "retryPolicy": {"strategy": 2}})["task"]
    assert (task["priority"], Task.objects.get(id=task["id"]).retry_kind) == (6, "linear")
    listed = call("AdminService", "ListTasks", {"state": 2})["tasks"]
    assert [t["id"] for t in listed] == [task["id"]]
    assert call("AdminService", "ListQueues", {})["queues"][0]["pending"] == "1"  # int64: a JSON string


def test_an_unknown_field_is_refused_by_name():
    before = state_of_everything()
    body = refused(post("/conveyor.v1.TaskService/Enqueue", '{"type": "x", "id": "t1"}'), 400, "invalid_argument")
    assert '"id"' in body["message"]
    assert state_of_everything() == before


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        ("{bad", "application/json"),
        ("[1]", "application/json"),
        (b'{"type": "\xff"}', "application/json"),
        ('{"type": "x", "priority": 1.5}', "application/json"),
        ('{"type": "x", "timeout": "soon"}', "application/json"),
        ('{"type": "x", "processAt": "noon"}', "application/json"),
        ("[" * 100_000, "application/json"),
        ("", "application/json"),
        (b"\x0a\x05ab", "application/proto"),  # a string field cut short
        (b"\xff\xff\xff", "application/proto"),
    ],
)
def test_a_malformed_body_is_invalid_argument_and_changes_nothing(raw, content_type):
    refused(post("/conveyor.v1.TaskService/Enqueue", raw, content_type), 400, "invalid_argument")
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    "body",
    [
        {"queue": "a\u0000b"},
        {"type": "x", "metadata": {"k": "\u0000"}},
        {"type": "x", "dependsOn": [{"taskId": "\u0000"}]},
    ],
)
def test_a_nul_character_in_any_string_is_invalid_argument(body):
    # PostgreSQL's text cannot hold NUL; it must be refused, not fail in the database.
    message = refused(post("/conveyor.v1.TaskService/Enqueue", json.dumps(body)), 400, "invalid_argument")["message"]
    assert "NUL" in message
    refused(post("/conveyor.v1.AdminService/DeleteQueueRateLimit", '{"queue": "\\u0000"}'), 400, "invalid_argument")
    assert Task.objects.count() == 0


def test_a_binary_body_is_a_protobuf_message():
    body = pb.EnqueueRequest(type="bin", queue="b").SerializeToString()
    response = post("/conveyor.v1.TaskService/Enqueue", body, "application/proto")
    assert (response.status_code, response.headers["content-type"]) == (200, "application/proto")
    assert pb.EnqueueResponse.FromString(response.content).task.type == "bin"


def test_unsupported_content_types_are_415():
    for content_type in ("application/x-www-form-urlencoded", "text/plain"):
        assert post("/conveyor.v1.TaskService/Enqueue", "type=x", content_type).status_code == 415
    # gRPC needs HTTP/2 trailers, which this server cannot send.
    assert post("/conveyor.v1.TaskService/Enqueue", b"\x00\x00\x00\x00\x00", "application/grpc").status_code == 415
    assert Task.objects.count() == 0


def test_unknown_procedures_are_404_and_worker_sessions_say_where_they_are():
    for path in ("/conveyor.v1.TaskService/Frobnicate", "/conveyor.v1.NoService/Enqueue"):
        assert post(path, "{}").status_code == 404
    response = post("/conveyor.v1.WorkerService/Session", b"", "application/connect+json")
    assert response.status_code == 200  # a stream's error is in its end-of-stream message
    assert b"unimplemented" in response.content and b"/ws/worker" in response.content


def test_errors_use_connect_codes_and_statuses(broker):
    enqueue(broker, unique_key="held")
    refused(post("/conveyor.v1.TaskService/Enqueue", '{"type": "x", "uniqueKey": "held"}'), 409, "already_exists")
    refused(post("/conveyor.v1.TaskService/GetTask", '{"id": "missing"}'), 404, "not_found")
    task = lease(broker)
    refused(post("/conveyor.v1.AdminService/DeleteTask", json.dumps({"id": task.id})), 400, "failed_precondition")


# -- access ------------------------------------------------------------------------------


def test_tokens_are_required_when_configured(tokens, broker):
    task = enqueue(broker)
    for headers in ({}, {"authorization": "Bearer wrong"}):
        for path, body in (("TaskService/Enqueue", '{"type": "x"}'), ("AdminService/ListQueues", "{}"),
                           ("TaskService/GetTask", json.dumps({"id": task.id}))):  # fmt: skip
            refused(post(f"/conveyor.v1.{path}", body, **headers), 401, "unauthenticated")
    assert call("TaskService", "GetTask", {"id": task.id}, authorization=f"Bearer {TOKEN}")["task"]["id"] == task.id


def test_read_only_mode_refuses_admin_changes_but_not_reads_or_enqueue(read_only):
    refused(post("/conveyor.v1.AdminService/PauseQueue", '{"queue": "q"}'), 403, "permission_denied")
    refused(post("/conveyor.v1.AdminService/BatchDeleteTasks", '{"ids": ["a"]}'), 403, "permission_denied")
    assert call("AdminService", "ListQueues", {}) == {}
    assert call("TaskService", "Enqueue", {"type": "x"})["task"]["state"] == "TASK_STATE_PENDING"


# -- the seed's WebhookService curl calls -------------------------------------------------


def test_the_seed_webhook_callbacks_work_without_an_api_token(tokens, broker):
    enqueue(broker, id="job-1")
    task = lease(broker)
    token = mint(task.id, task.lease_id)
    assert call("WebhookService", "Heartbeat", {"leaseToken": token}) == {}
    assert call("WebhookService", "ReportResult", {"leaseToken": token, "outcome": "TASK_OUTCOME_SUCCESS"}) == {}
    assert Task.objects.get(id=task.id).state == "completed"


def test_a_failure_report_takes_error_msg(broker):
    enqueue(broker, id="job-2", max_retry=3)
    task = lease(broker)
    body = {"leaseToken": mint(task.id, task.lease_id), "outcome": "TASK_OUTCOME_RETRY", "errorMsg": "smtp down"}
    call("WebhookService", "ReportResult", body)
    stored = Task.objects.get(id=task.id)
    assert (stored.state, stored.last_error) == ("retry", "smtp down")


def test_a_host_project_mounts_the_services_under_its_prefix():
    from asgiref.sync import async_to_sync

    from conveyor.connect import mount

    async def django_side(scope, receive, send):
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send_both():
        transport = httpx.ASGITransport(app=mount(django_side, prefix="/conveyor/"))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            served = await client.post("/conveyor/conveyor.v1.TaskService/Enqueue", json={"type": "x"})
            passed = await client.post("/conveyor.v1.TaskService/Enqueue", json={"type": "x"})
            return served, passed

    served, passed = async_to_sync(send_both)()
    assert served.status_code == 200 and served.json()["task"]["type"] == "x"
    assert passed.status_code == 299  # outside the prefix: the host's own application
