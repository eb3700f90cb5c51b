"""The Connect-compatible paths: POST /conveyor.v1.<Service>/<Method>, protobuf JSON."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from conveyor import cluster
from conveyor.api import connect
from conveyor.models import CronEntry, GroupConfig, Queue, Task, WebhookRegistration
from tests.api.conftest import connect_refused, enqueue, lease, ok, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)

SEED_BODY = '{"queue":"email","type":"email:send","payload":"eyJ0byI6ImFAYi5jIn0=","contentType":"application/json"}'


def call(api, service, method, body=None, status=200):
    return ok(api.connect(service, method, body), status)


def test_every_implemented_method_is_exercised_here():
    exercised = {
        "TaskService": {"Enqueue", "EnqueueBatch", "EnqueueTx", "GetTask"},
        "AdminService": {
            "ListQueues", "ListRateLimits", "ListConcurrencyLimits", "ListGroupConfigs", "ListTasks", "GetTask",
            "ListCronEntries", "ListWebhookWorkers", "ListWorkerSessions", "ClusterInfo", "BrokerInfo",
            "PauseQueue", "ResumeQueue", "SetQueueRateLimit", "DeleteQueueRateLimit", "SetQueueConcurrencyLimit",
            "DeleteQueueConcurrencyLimit", "SetGroupConfig", "DeleteGroupConfig",
            "CancelTask", "DeleteTask", "RunTask", "RescheduleTask", "ArchiveTask",
            "CancelTaskBatch", "DeleteTaskBatch", "RunTaskBatch", "RescheduleTaskBatch", "ArchiveTaskBatch",
            "UpsertCronEntry", "PauseCronEntry", "ResumeCronEntry", "DeleteCronEntry",
            "UpsertWebhookWorker", "PauseWebhookWorker", "ResumeWebhookWorker", "DeleteWebhookWorker",
        },
    }  # fmt: skip
    assert set(connect.TASK_SERVICE) == exercised["TaskService"]
    assert set(connect.ADMIN_READS) | set(connect.ADMIN_WRITES) == exercised["AdminService"]


# -- TaskService -------------------------------------------------------------------------


def test_the_seed_quick_start_body_is_accepted_verbatim(api):
    response = api.call("POST", "/conveyor.v1.TaskService/Enqueue", raw=SEED_BODY)
    task = ok(response)["task"]
    assert (task["queue"], task["type"], task["contentType"], task["state"]) == (
        "email",
        "email:send",
        "application/json",
        "TASK_STATE_PENDING",
    )
    assert task["json"] == {"to": "a@b.c"}
    assert bytes(Task.objects.get(id=task["id"]).payload) == b'{"to":"a@b.c"}'


def test_enqueue_reads_camel_case_durations_and_enum_names(api):
    body = call(api, "TaskService", "Enqueue", {"id": "t1", "type": "x", "processIn": "30s", "timeout": "1.5s", "maxRetry": 3,
                                                "retryPolicy": {"kind": "RETRY_POLICY_LINEAR", "base": "1s"}, "uniqueKey": "u"})  # fmt: skip
    task = body["task"]
    assert body["created"] is True
    assert (task["state"], task["timeout"], task["maxRetry"], task["uniqueKey"]) == (
        "TASK_STATE_SCHEDULED",
        "1.5s",
        3,
        "u",
    )
    due = datetime.fromisoformat(task["dueAt"]) - datetime.fromisoformat(task["enqueuedAt"])
    assert due == timedelta(seconds=30)
    stored = Task.objects.get(id="t1")
    assert (stored.retry_kind, stored.retry_base, stored.timeout) == ("linear", 1.0, 1.5)
    again = call(api, "TaskService", "Enqueue", {"id": "t1", "type": "other"})
    assert (again["created"], again["task"]["type"]) == (False, "x")


def test_enqueue_dependencies_take_the_on_failure_enum(api, broker):
    parent = enqueue(broker, id="parent")
    task = call(
        api,
        "TaskService",
        "Enqueue",
        {"type": "child", "dependsOn": [{"taskId": parent.id, "onFailure": "ON_FAILURE_CASCADE_CANCEL"}]},
    )["task"]
    assert task["state"] == "TASK_STATE_BLOCKED"


def test_enqueue_batch_answers_per_item_with_the_request_index(api, broker):
    enqueue(broker, unique_key="held")
    results = call(api, "TaskService", "EnqueueBatch", {"tasks": [{"type": "a"}, {"type": ""}, {"type": "b", "bogusField": 1},
                                                                   {"type": "c", "uniqueKey": "held"}, {"type": "d"}]})["results"]  # fmt: skip
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert results[0]["created"] and results[4]["task"]["type"] == "d"
    assert results[1]["error"] == {"code": "invalid_argument", "message": "item 1: type: is required"}
    assert results[2]["error"]["code"] == "invalid_argument"
    assert results[2]["error"]["message"].startswith("item 2: bogusField: ")  # named as the client wrote it
    assert results[3]["error"]["code"] == "already_exists"
    assert Task.objects.count() == 3


def test_enqueue_tx_is_all_or_nothing_and_names_the_item(api):
    assert [
        t["type"] for t in call(api, "TaskService", "EnqueueTx", {"tasks": [{"type": "a"}, {"type": "b"}]})["tasks"]
    ] == ["a", "b"]
    before = state_of_everything()
    body = connect_refused(
        api.connect("TaskService", "EnqueueTx", {"tasks": [{"type": "c"}, {"type": "d", "maxRetry": "x"}]}),
        400,
        "invalid_argument",
    )
    assert body["message"] == "item 1: maxRetry: must be an integer"
    body = connect_refused(
        api.connect(
            "TaskService", "EnqueueTx", {"tasks": [{"type": "c", "uniqueKey": "k"}, {"type": "d", "uniqueKey": "k"}]}
        ),
        409,
        "already_exists",
    )
    assert body["message"].startswith("item 1: ")
    assert state_of_everything() == before


def test_get_task_by_id_or_task_id(api, broker):
    task = enqueue(broker)
    assert call(api, "TaskService", "GetTask", {"id": task.id})["task"]["id"] == task.id
    assert call(api, "AdminService", "GetTask", {"taskId": task.id})["task"]["id"] == task.id
    connect_refused(api.connect("TaskService", "GetTask", {"id": "nope"}), 404, "not_found")
    connect_refused(api.connect("TaskService", "GetTask", {}), 400, "invalid_argument")


# -- AdminService ------------------------------------------------------------------------


def test_queue_methods(api, broker):
    enqueue(broker, queue="mail")
    assert call(api, "AdminService", "PauseQueue", {"queue": "mail"}) == {}
    queues = call(api, "AdminService", "ListQueues")["queues"]
    assert [(q["name"], q["paused"], q["counts"]["TASK_STATE_PENDING"], q["total"]) for q in queues] == [
        ("mail", True, 1, 1)
    ]
    assert call(api, "AdminService", "ResumeQueue", {"name": "mail"}) == {}
    assert not Queue.objects.get(name="mail").paused


def test_limit_methods(api):
    assert call(api, "AdminService", "SetQueueRateLimit", {"queue": "q", "ratePerSec": 2, "burst": 3}) == {
        "limit": {"queue": "q", "ratePerSec": 2.0, "burst": 3}
    }
    assert call(api, "AdminService", "ListRateLimits") == {"limits": [{"queue": "q", "ratePerSec": 2.0, "burst": 3}]}
    assert call(api, "AdminService", "DeleteQueueRateLimit", {"queue": "q"}) == {}
    assert call(api, "AdminService", "ListRateLimits") == {"limits": []}
    assert call(api, "AdminService", "SetQueueConcurrencyLimit", {"queue": "q", "max": 2}) == {
        "limit": {"queue": "q", "max": 2}
    }
    assert call(api, "AdminService", "ListConcurrencyLimits") == {"limits": [{"queue": "q", "max": 2}]}
    assert call(api, "AdminService", "DeleteQueueConcurrencyLimit", {"queue": "q"}) == {}
    assert call(api, "AdminService", "ListConcurrencyLimits") == {"limits": []}


def test_group_config_methods_write_durations_as_strings(api):
    config = call(
        api,
        "AdminService",
        "SetGroupConfig",
        {"queue": "q", "group": "g", "maxSize": 3, "maxDelay": "90s", "grace": "1.5s"},
    )
    assert config == {"config": {"queue": "q", "group": "g", "maxSize": 3, "maxDelay": "90s", "grace": "1.5s"}}
    assert call(api, "AdminService", "ListGroupConfigs") == {"configs": [config["config"]]}
    assert call(api, "AdminService", "DeleteGroupConfig", {"queue": "q", "group": "g"}) == {}
    assert GroupConfig.objects.count() == 0


def test_list_tasks_filters_by_state_enum_and_pages(api, broker):
    a, b = enqueue(broker), enqueue(broker)
    c = enqueue(broker, process_in=60)
    assert [t["id"] for t in call(api, "AdminService", "ListTasks", {"state": "TASK_STATE_SCHEDULED"})["tasks"]] == [
        c.id
    ]
    first = call(api, "AdminService", "ListTasks", {"pageSize": 2})
    assert [t["id"] for t in first["tasks"]] == [c.id, b.id]
    second = call(api, "AdminService", "ListTasks", {"pageSize": "2", "pageToken": first["nextPageToken"]})
    assert [t["id"] for t in second["tasks"]] == [a.id]
    assert second["nextPageToken"] == ""
    connect_refused(api.connect("AdminService", "ListTasks", {"state": "TASK_STATE_DONE"}), 400, "invalid_argument")


def test_single_task_actions(api, broker):
    task = enqueue(broker)
    assert call(api, "AdminService", "ArchiveTask", {"id": task.id})["task"]["state"] == "TASK_STATE_ARCHIVED"
    assert call(api, "AdminService", "RunTask", {"taskId": task.id})["task"]["state"] == "TASK_STATE_PENDING"
    assert (
        call(api, "AdminService", "RescheduleTask", {"id": task.id, "processIn": "1h"})["task"]["state"]
        == "TASK_STATE_SCHEDULED"
    )
    assert call(api, "AdminService", "CancelTask", {"id": task.id})["task"]["state"] == "TASK_STATE_CANCELED"
    connect_refused(api.connect("AdminService", "CancelTask", {"id": task.id}), 400, "failed_precondition")
    assert call(api, "AdminService", "DeleteTask", {"id": task.id}) == {}
    assert not Task.objects.filter(id=task.id).exists()


def test_batch_task_actions_answer_per_id(api, broker):
    a, b = enqueue(broker), enqueue(broker)
    archived = call(api, "AdminService", "ArchiveTaskBatch", {"ids": [a.id, "nope"]})["results"]
    assert [(r["id"], r["ok"]) for r in archived] == [(a.id, True), ("nope", False)]
    assert archived[1]["error"] == {"code": "not_found", "message": "task nope not found"}
    assert (
        call(api, "AdminService", "RunTaskBatch", {"taskIds": [a.id]})["results"][0]["task"]["state"]
        == "TASK_STATE_PENDING"
    )
    moved = call(api, "AdminService", "RescheduleTaskBatch", {"ids": [a.id], "processAt": "2001-01-01T00:00:00Z"})[
        "results"
    ]
    assert moved[0]["task"]["state"] == "TASK_STATE_PENDING"
    assert (
        call(api, "AdminService", "CancelTaskBatch", {"ids": [b.id]})["results"][0]["task"]["state"]
        == "TASK_STATE_CANCELED"
    )
    assert [r["ok"] for r in call(api, "AdminService", "DeleteTaskBatch", {"ids": [a.id, b.id]})["results"]] == [
        True,
        True,
    ]
    assert Task.objects.count() == 0


def test_cron_methods(api):
    entry = call(
        api,
        "AdminService",
        "UpsertCronEntry",
        {"id": "c", "spec": "@daily", "taskType": "t", "options": {"timeout": "1m"}},
    )["entry"]
    assert (entry["id"], entry["taskType"], entry["options"], entry["nextRunAt"][-1]) == (
        "c",
        "t",
        {"timeout": 60.0},
        "Z",
    )
    assert [e["id"] for e in call(api, "AdminService", "ListCronEntries")["entries"]] == ["c"]
    assert call(api, "AdminService", "PauseCronEntry", {"id": "c"})["entry"]["paused"] is True
    assert call(api, "AdminService", "ResumeCronEntry", {"id": "c"})["entry"]["paused"] is False
    assert call(api, "AdminService", "DeleteCronEntry", {"id": "c"}) == {}
    assert CronEntry.objects.count() == 0
    connect_refused(api.connect("AdminService", "PauseCronEntry", {"id": "c"}), 404, "not_found")


def test_webhook_methods_never_show_secrets(api):
    secret = "connect-s3cret-value"
    outputs = [call(api, "AdminService", "UpsertWebhookWorker", {"name": "w", "url": "https://x.example.com/", "queues": {"q": 1},
                                                                  "secrets": [secret], "requestTimeout": "5s", "batchTypes": ["d"]})]  # fmt: skip
    hook = outputs[0]["webhook"]
    assert (hook["name"], hook["secretCount"], hook["requestTimeout"], hook["batchTypes"]) == ("w", 1, "5s", ["d"])
    outputs.append(call(api, "AdminService", "ListWebhookWorkers"))
    outputs.append(call(api, "AdminService", "PauseWebhookWorker", {"name": "w"}))
    assert outputs[-1]["webhook"]["paused"] is True
    outputs.append(call(api, "AdminService", "ResumeWebhookWorker", {"name": "w"}))
    outputs.append(api.connect("AdminService", "UpsertWebhookWorker", {"name": "w", "url": "https://x.example.com/", "queues": {"q": 1},
                                                                        "secrets": [secret, secret, secret]}).json())  # fmt: skip
    assert outputs[-1]["code"] == "invalid_argument"
    for output in outputs:
        assert secret not in str(output)
    assert call(api, "AdminService", "DeleteWebhookWorker", {"name": "w"}) == {}
    assert WebhookRegistration.objects.count() == 0


def test_cluster_methods(api):
    now = datetime.now(UTC)
    cluster.register_node("node-a", "10.0.0.1", 8080, 1, "0.1.0", now)
    cluster.add_session("node-a", "s1", now, queues={"q": 1}, concurrency=2, sdk_version="0.1.0")
    assert [s["id"] for s in call(api, "AdminService", "ListWorkerSessions")["sessions"]] == ["s1"]
    assert call(api, "AdminService", "ListWorkerSessions")["sessions"][0]["sdkVersion"] == "0.1.0"
    nodes = call(api, "AdminService", "ClusterInfo")["nodes"]
    assert [(n["id"], n["host"], n["port"]) for n in nodes] == [("node-a", "10.0.0.1", 8080)]
    info = call(api, "AdminService", "BrokerInfo")
    assert info["driver"] == "sqlite" and info["version"]


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "body", "status", "code"),
    [
        ("Enqueue", {"type": ""}, 400, "invalid_argument"),
        ("Enqueue", {"type": "x", "queue": "-q"}, 400, "invalid_argument"),
        ("Enqueue", {"type": "x", "processIn": "soon"}, 400, "invalid_argument"),
        ("Enqueue", {"type": "x", "payload": "!!"}, 400, "invalid_argument"),
        ("Enqueue", {"type": "x", "processAt": "noon"}, 400, "invalid_argument"),
        ("Enqueue", {"type": "x", "uniqueKey": "held"}, 409, "already_exists"),
        ("GetTask", {"id": "missing"}, 404, "not_found"),
    ],
)
def test_errors_use_connect_codes_and_http_statuses(api, broker, method, body, status, code):
    enqueue(broker, unique_key="held")
    before = state_of_everything()
    connect_refused(api.connect("TaskService", method, body), status, code)
    assert state_of_everything() == before


def test_invalid_state_is_failed_precondition_with_http_400(api, broker):
    enqueue(broker)
    task = lease(broker)
    connect_refused(api.connect("AdminService", "DeleteTask", {"id": task.id}), 400, "failed_precondition")
    assert Task.objects.filter(id=task.id).exists()


def test_refused_fields_are_named_in_camel_case(api):
    body = connect_refused(
        api.connect("TaskService", "Enqueue", {"type": "x", "dependsOn": [{"taskId": "nope"}]}), 400, "invalid_argument"
    )
    assert body["message"].startswith("dependsOn[0].taskId: ")
    body = connect_refused(
        api.connect("TaskService", "Enqueue", {"type": "x", "uniqueTtl": "1h"}), 400, "invalid_argument"
    )
    assert body["message"].startswith("uniqueTtl: ")


@pytest.mark.parametrize(
    ("raw", "content_type", "status", "code"),
    [
        ("{bad", "application/json", 400, "invalid_argument"),
        ("[1]", "application/json", 400, "invalid_argument"),
        (b'{"type": "\xff"}', "application/json", 400, "invalid_argument"),
        ('{"type": "x", "priority": NaN}', "application/json", 400, "invalid_argument"),
        ("[" * 100_000, "application/json", 400, "invalid_argument"),
        ("type=x", "application/x-www-form-urlencoded", 415, "unimplemented"),
        ("\x0a\x01x", "application/proto", 415, "unimplemented"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(api, raw, content_type, status, code):
    connect_refused(
        api.call("POST", "/conveyor.v1.TaskService/Enqueue", raw=raw, content_type=content_type), status, code
    )
    assert Task.objects.count() == 0


def test_an_empty_body_is_an_empty_message(api):
    connect_refused(api.call("POST", "/conveyor.v1.TaskService/GetTask", raw=""), 400, "invalid_argument")
    assert ok(api.call("POST", "/conveyor.v1.AdminService/ListQueues", raw="")) == {"queues": []}


def test_get_is_405_with_allow_post(api):
    response = api.client.get("/conveyor.v1.AdminService/ListQueues")
    connect_refused(response, 405, "unimplemented")
    assert response["Allow"] == "POST"


@pytest.mark.parametrize(
    "path",
    ["/conveyor.v1.TaskService/Frobnicate", "/conveyor.v1.NoService/Enqueue", "/conveyor.v1.WorkerService/Session"],
)
def test_unknown_methods_are_unimplemented(api, path):
    connect_refused(api.call("POST", path, {}), 501, "unimplemented")


def test_payload_bytes_round_trip_as_base64(api):
    raw = bytes(range(200))
    task = call(
        api,
        "TaskService",
        "Enqueue",
        {"type": "blob", "payload": base64.b64encode(raw).decode(), "contentType": "application/octet-stream"},
    )["task"]
    assert base64.b64decode(task["payload"]) == raw
    assert task["payloadSize"] == 200
