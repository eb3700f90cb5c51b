"""Every unary RPC of TaskService, AdminService and WebhookService through the
generated connectrpc clients, in the JSON codec and in binary protobuf."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from conveyor import cluster
from conveyor.connect.app import services
from conveyor.models import CronEntry, GroupConfig, Queue, Task, WebhookRegistration
from conveyor.v1 import service_pb2 as pb
from conveyor.v1 import task_pb2 as tpb
from tests.api.conftest import enqueue, lease, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)


def secs(n: float) -> Duration:
    d = Duration()
    d.FromNanoseconds(int(n * 1e9))
    return d


def at(when: datetime) -> Timestamp:
    t = Timestamp()
    t.FromDatetime(when)
    return t


def refused(call, code: Code) -> ConnectError:
    with pytest.raises(ConnectError) as info:
        call()
    assert info.value.code == code, info.value
    return info.value


def test_every_method_of_the_contract_is_served_and_exercised_here():
    exercised = {
        "TaskService": {"Enqueue", "EnqueueBatch", "EnqueueTx", "GetTask"},
        "WebhookService": {"Heartbeat", "ReportResult"},
        "AdminService": {m.name for m in pb.DESCRIPTOR.services_by_name["AdminService"].methods},
        "WorkerService": {"Session"},
    }
    served = {path.rsplit(".", 1)[1]: app for path, app in services().items()}
    for service, methods in exercised.items():
        assert {m.name for m in pb.DESCRIPTOR.services_by_name[service].methods} == methods
        assert served[service]


# -- TaskService -------------------------------------------------------------------------


def test_enqueue_stores_the_task_and_answers_its_info(rpc):
    request = pb.EnqueueRequest(task_id="t1", type="x", queue="mail", payload=b'{"a":1}', priority=7, max_retry=3)
    task = rpc("TaskService", "enqueue", request).task
    assert (task.id, task.queue, task.type, task.state, task.priority, task.max_retry) == (
        "t1", "mail", "x", tpb.TASK_STATE_PENDING, 7, 3,
    )  # fmt: skip
    assert (task.payload, task.content_type) == (b'{"a":1}', "application/json")
    assert task.HasField("enqueued_at") and not task.HasField("completed_at")
    stored = Task.objects.get(id="t1")
    assert (stored.queue, stored.priority, bytes(stored.payload)) == ("mail", 7, b'{"a":1}')
    again = rpc("TaskService", "enqueue", pb.EnqueueRequest(task_id="t1", type="other")).task
    assert again.type == "x"  # a repeated id returns the stored task


def test_enqueue_takes_durations_timestamps_and_enums(rpc, broker):
    parent = enqueue(broker, id="parent")
    deadline = datetime(2100, 1, 2, 3, 4, 5, tzinfo=UTC)
    request = pb.EnqueueRequest(
        type="x", process_in=secs(30), timeout=secs(1.5), deadline=at(deadline),
        retry_policy=tpb.RetryPolicy(strategy=tpb.RETRY_STRATEGY_LINEAR, base=secs(1), max=secs(9)),
        depends_on=[tpb.TaskDependency(task_id=parent.id, on_failure=tpb.DEPENDENCY_FAILURE_POLICY_CASCADE_CANCEL)],
    )  # fmt: skip
    task = rpc("TaskService", "enqueue", request).task
    assert task.state == tpb.TASK_STATE_BLOCKED
    stored = Task.objects.get(id=task.id)
    assert (stored.timeout, stored.deadline, stored.retry_kind, stored.retry_base, stored.retry_cap) == (
        1.5, deadline, "linear", 1.0, 9.0,
    )  # fmt: skip
    assert stored.due_at - stored.enqueued_at == timedelta(seconds=30)


def test_enqueue_refusals_name_the_field(rpc, broker):
    enqueue(broker, unique_key="held")
    before = state_of_everything()
    error = refused(lambda: rpc("TaskService", "enqueue", pb.EnqueueRequest(type="")), Code.INVALID_ARGUMENT)
    assert error.message.startswith("type: ")
    error = refused(
        lambda: rpc(
            "TaskService", "enqueue", pb.EnqueueRequest(type="x", depends_on=[tpb.TaskDependency(task_id="no")])
        ),
        Code.INVALID_ARGUMENT,
    )
    assert error.message.startswith("dependsOn[0].taskId: ")
    refused(lambda: rpc("TaskService", "enqueue", pb.EnqueueRequest(type="x", unique_key="held")), Code.ALREADY_EXISTS)
    assert state_of_everything() == before


def test_enqueue_batch_answers_each_item(rpc, broker):
    enqueue(broker, unique_key="held")
    items = [pb.EnqueueRequest(type="a"), pb.EnqueueRequest(type=""), pb.EnqueueRequest(type="c", unique_key="held")]
    results = rpc("TaskService", "enqueue_batch", pb.EnqueueBatchRequest(tasks=items)).results
    assert [(r.task.type, r.error.split(":")[0]) for r in results] == [
        ("a", ""), ("", "invalid_argument"), ("", "already_exists"),
    ]  # fmt: skip
    assert results[1].error == "invalid_argument: item 1: type: is required"
    assert Task.objects.count() == 2
    refused(lambda: rpc("TaskService", "enqueue_batch", pb.EnqueueBatchRequest()), Code.INVALID_ARGUMENT)


def test_enqueue_tx_is_all_or_nothing(rpc):
    tx = pb.EnqueueTxRequest(tasks=[pb.EnqueueRequest(type="a"), pb.EnqueueRequest(type="b")])
    assert [t.type for t in rpc("TaskService", "enqueue_tx", tx).tasks] == ["a", "b"]
    before = state_of_everything()
    bad = pb.EnqueueTxRequest(
        tasks=[pb.EnqueueRequest(type="c", unique_key="k"), pb.EnqueueRequest(type="d", unique_key="k")]
    )
    assert refused(lambda: rpc("TaskService", "enqueue_tx", bad), Code.ALREADY_EXISTS).message.startswith("item 1: ")
    bad = pb.EnqueueTxRequest(tasks=[pb.EnqueueRequest(type="c"), pb.EnqueueRequest(type="")])
    assert refused(lambda: rpc("TaskService", "enqueue_tx", bad), Code.INVALID_ARGUMENT).message.startswith("item 1: ")
    assert state_of_everything() == before


def test_get_task(rpc, broker):
    task = enqueue(broker)
    assert rpc("TaskService", "get_task", pb.GetTaskRequest(id=task.id)).task.id == task.id
    refused(lambda: rpc("TaskService", "get_task", pb.GetTaskRequest(id="nope")), Code.NOT_FOUND)
    refused(lambda: rpc("TaskService", "get_task", pb.GetTaskRequest()), Code.INVALID_ARGUMENT)


# -- AdminService ------------------------------------------------------------------------


def test_queue_methods(rpc, broker):
    enqueue(broker, queue="mail")
    enqueue(broker, queue="mail", process_in=60)
    rpc("AdminService", "pause_queue", pb.PauseQueueRequest(queue="mail"))
    queues = rpc("AdminService", "list_queues", pb.ListQueuesRequest()).queues
    assert [(q.name, q.paused, q.pending, q.scheduled, q.active) for q in queues] == [("mail", True, 1, 1, 0)]
    rpc("AdminService", "resume_queue", pb.ResumeQueueRequest(queue="mail"))
    assert not Queue.objects.get(name="mail").paused


def test_rate_and_concurrency_limits(rpc):
    rpc("AdminService", "set_queue_rate_limit", pb.SetQueueRateLimitRequest(queue="q", rate_per_sec=2.5, burst=3))
    limits = rpc("AdminService", "list_rate_limits", pb.ListRateLimitsRequest()).limits
    assert [(r.queue, r.rate_per_sec, r.burst) for r in limits] == [("q", 2.5, 3)]
    rpc("AdminService", "delete_queue_rate_limit", pb.DeleteQueueRateLimitRequest(queue="q"))
    assert not rpc("AdminService", "list_rate_limits", pb.ListRateLimitsRequest()).limits
    error = refused(
        lambda: rpc("AdminService", "set_queue_rate_limit", pb.SetQueueRateLimitRequest(queue="q", burst=1)),
        Code.INVALID_ARGUMENT,
    )
    assert error.message.startswith("ratePerSec: ")
    rpc("AdminService", "set_queue_concurrency_limit", pb.SetQueueConcurrencyLimitRequest(queue="q", max_active=2))
    limits = rpc("AdminService", "list_concurrency_limits", pb.ListConcurrencyLimitsRequest()).limits
    assert [(c.queue, c.max_active) for c in limits] == [("q", 2)]
    rpc("AdminService", "delete_queue_concurrency_limit", pb.DeleteQueueConcurrencyLimitRequest(queue="q"))
    assert not rpc("AdminService", "list_concurrency_limits", pb.ListConcurrencyLimitsRequest()).limits


def test_group_configs(rpc):
    request = pb.SetGroupConfigRequest(queue="q", group="g", max_size=3, max_delay=secs(90), grace_period=secs(1.5))
    rpc("AdminService", "set_group_config", request)
    configs = rpc("AdminService", "list_group_configs", pb.ListGroupConfigsRequest()).configs
    assert [(c.queue, c.group, c.max_size, c.max_delay.seconds, c.grace_period.ToNanoseconds()) for c in configs] == [
        ("q", "g", 3, 90, 1_500_000_000)
    ]
    rpc("AdminService", "delete_group_config", pb.DeleteGroupConfigRequest(queue="q", group="g"))
    assert GroupConfig.objects.count() == 0


def test_list_tasks_filters_by_state_and_pages(rpc, broker):
    a, b = enqueue(broker), enqueue(broker)
    c = enqueue(broker, process_in=60)
    scheduled = rpc("AdminService", "list_tasks", pb.ListTasksRequest(state=tpb.TASK_STATE_SCHEDULED)).tasks
    assert [t.id for t in scheduled] == [c.id]
    first = rpc("AdminService", "list_tasks", pb.ListTasksRequest(limit=2))
    assert [t.id for t in first.tasks] == [c.id, b.id]
    second = rpc("AdminService", "list_tasks", pb.ListTasksRequest(limit=2, page_token=first.next_page_token))
    assert ([t.id for t in second.tasks], second.next_page_token) == ([a.id], "")


def test_single_task_actions(rpc, broker):
    task = enqueue(broker)

    def state() -> str:
        return Task.objects.get(id=task.id).state

    rpc("AdminService", "archive_task", pb.ArchiveTaskRequest(id=task.id))
    assert state() == "archived"
    rpc("AdminService", "run_task", pb.RunTaskRequest(id=task.id))
    assert state() == "pending"
    rpc("AdminService", "reschedule_task", pb.RescheduleTaskRequest(id=task.id, process_in=secs(3600)))
    assert state() == "scheduled"
    rpc("AdminService", "cancel_task", pb.CancelTaskRequest(id=task.id))
    assert state() == "canceled"
    refused(lambda: rpc("AdminService", "cancel_task", pb.CancelTaskRequest(id=task.id)), Code.FAILED_PRECONDITION)
    refused(lambda: rpc("AdminService", "cancel_task", pb.CancelTaskRequest(id="nope")), Code.NOT_FOUND)
    refused(lambda: rpc("AdminService", "run_task", pb.RunTaskRequest()), Code.INVALID_ARGUMENT)
    rpc("AdminService", "delete_task", pb.DeleteTaskRequest(id=task.id))
    assert not Task.objects.filter(id=task.id).exists()


def test_deleting_an_active_task_is_failed_precondition(rpc, broker):
    enqueue(broker)
    task = lease(broker)
    refused(lambda: rpc("AdminService", "delete_task", pb.DeleteTaskRequest(id=task.id)), Code.FAILED_PRECONDITION)
    assert Task.objects.filter(id=task.id).exists()


def test_batch_task_actions_answer_per_id(rpc, broker):
    a, b = enqueue(broker), enqueue(broker)
    archived = rpc("AdminService", "batch_archive_tasks", pb.BatchTasksRequest(ids=[a.id, "nope"])).results
    assert [(r.id, r.error) for r in archived] == [(a.id, ""), ("nope", "not_found: task nope not found")]
    assert rpc("AdminService", "batch_run_tasks", pb.BatchTasksRequest(ids=[a.id])).results[0].error == ""
    assert rpc("AdminService", "batch_cancel_tasks", pb.BatchTasksRequest(ids=[b.id])).results[0].error == ""
    assert Task.objects.get(id=b.id).state == "canceled"
    deleted = rpc("AdminService", "batch_delete_tasks", pb.BatchTasksRequest(ids=[a.id, b.id])).results
    assert [r.error for r in deleted] == ["", ""]
    assert Task.objects.count() == 0


def test_cron_methods(rpc):
    options = tpb.TaskOptions(timeout=secs(60), priority=6)
    entry = pb.CronEntry(id="c", spec="@daily", task_type="t", queue="q", payload=b"{}", options=options)
    rpc("AdminService", "upsert_cron", pb.UpsertCronRequest(entry=entry))
    (listed,) = rpc("AdminService", "list_cron", pb.ListCronRequest()).entries
    assert (listed.id, listed.task_type, listed.options.timeout.seconds, listed.options.priority) == ("c", "t", 60, 6)
    assert listed.HasField("next_run_at")
    rpc("AdminService", "pause_cron", pb.PauseCronRequest(id="c"))
    assert CronEntry.objects.get(id="c").paused
    rpc("AdminService", "resume_cron", pb.ResumeCronRequest(id="c"))
    assert not CronEntry.objects.get(id="c").paused
    rpc("AdminService", "delete_cron", pb.DeleteCronRequest(id="c"))
    assert CronEntry.objects.count() == 0
    refused(lambda: rpc("AdminService", "pause_cron", pb.PauseCronRequest(id="c")), Code.NOT_FOUND)
    bad = pb.CronEntry(id="c", spec="@daily", task_type="t", options=tpb.TaskOptions(unique_key="k"))
    error = refused(lambda: rpc("AdminService", "upsert_cron", pb.UpsertCronRequest(entry=bad)), Code.INVALID_ARGUMENT)
    assert error.message.startswith("entry.options.uniqueKey: ")


def test_webhook_methods_never_show_secrets(rpc):
    secret = "connect-s3cret-value"
    worker = pb.WebhookWorker(name="w", url="https://x.example.com/", queues={"q": 2}, concurrency=3,
                              secrets=[secret], batch_types=["d"], request_timeout=secs(5))  # fmt: skip
    rpc("AdminService", "upsert_webhook_worker", pb.UpsertWebhookWorkerRequest(worker=worker))
    (listed,) = rpc("AdminService", "list_webhook_workers", pb.ListWebhookWorkersRequest()).workers
    assert (listed.name, dict(listed.queues), listed.concurrency, list(listed.secrets)) == ("w", {"q": 2}, 3, [])
    assert (list(listed.batch_types), listed.request_timeout.seconds) == (["d"], 5)
    assert secret not in str(listed)
    rpc("AdminService", "pause_webhook_worker", pb.PauseWebhookWorkerRequest(name="w"))
    assert WebhookRegistration.objects.get(name="w").paused
    rpc("AdminService", "resume_webhook_worker", pb.ResumeWebhookWorkerRequest(name="w"))
    assert not WebhookRegistration.objects.get(name="w").paused
    worker.secrets[:] = [secret] * 3
    error = refused(
        lambda: rpc("AdminService", "upsert_webhook_worker", pb.UpsertWebhookWorkerRequest(worker=worker)),
        Code.INVALID_ARGUMENT,
    )
    assert error.message.startswith("worker.secrets") and secret not in error.message
    rpc("AdminService", "delete_webhook_worker", pb.DeleteWebhookWorkerRequest(name="w"))
    assert WebhookRegistration.objects.count() == 0


def test_cluster_methods(rpc):
    now = datetime.now(UTC)
    cluster.register_node("node-a", "10.0.0.1", 8080, 1, "0.1.0", now)
    cluster.add_session("node-a", "s1", now, queues={"q": 1, "p": 2}, concurrency=2, sdk_version="0.1.0")
    (session,) = rpc("AdminService", "list_worker_sessions", pb.ListWorkerSessionsRequest()).sessions
    assert (session.id, list(session.queues), session.concurrency, session.sdk_version) == (
        "s1",
        ["p", "q"],
        2,
        "0.1.0",
    )
    (node,) = rpc("AdminService", "cluster_info", pb.ClusterInfoRequest()).nodes
    assert node.address == "10.0.0.1:8080" and node.HasField("started_at")
    info = rpc("AdminService", "broker_info", pb.BrokerInfoRequest())
    assert info.driver == "sqlite" and info.metrics["version"]


# -- WebhookService ----------------------------------------------------------------------


def test_webhook_heartbeat_and_report_result(rpc, delivery):
    task, token = delivery
    before = Task.objects.get(id=task.id).lease_expires_at
    rpc("WebhookService", "heartbeat", pb.WebhookHeartbeatRequest(lease_token=token))
    assert Task.objects.get(id=task.id).lease_expires_at >= before
    report = pb.WebhookReportResultRequest(lease_token=token, outcome=pb.TASK_OUTCOME_SUCCESS, result=b'{"ok":1}')
    rpc("WebhookService", "report_result", report)
    stored = Task.objects.get(id=task.id)
    assert (stored.state, bytes(stored.result)) == ("completed", b'{"ok":1}')
    refused(lambda: rpc("WebhookService", "report_result", report), Code.FAILED_PRECONDITION)  # lease lost


def test_webhook_refusals(rpc, delivery):
    _, token = delivery
    before = state_of_everything()
    for bad in (pb.WebhookReportResultRequest(lease_token=token), pb.WebhookReportResultRequest(
            lease_token=token, outcome=pb.TASK_OUTCOME_RELEASED)):  # fmt: skip
        assert refused(lambda b=bad: rpc("WebhookService", "report_result", b), Code.INVALID_ARGUMENT)
    refused(lambda: rpc("WebhookService", "heartbeat", pb.WebhookHeartbeatRequest()), Code.UNAUTHENTICATED)
    refused(
        lambda: rpc("WebhookService", "heartbeat", pb.WebhookHeartbeatRequest(lease_token="x.y")), Code.UNAUTHENTICATED
    )
    assert state_of_everything() == before


def test_worker_sessions_are_not_served_here(rpc):
    from conveyor.v1.service_connect import WorkerServiceClient

    assert WorkerServiceClient  # the WebSocket protocol carries them (tests/e2e, docs/protocol.md)


def test_deleting_a_task_unfinished_tasks_wait_on_is_failed_precondition(rpc, broker):
    from conveyor.broker import Dependency

    parent = enqueue(broker, id="parent")
    enqueue(broker, id="child", depends_on=[Dependency(parent.id)])
    before = state_of_everything()
    error = refused(
        lambda: rpc("AdminService", "delete_task", pb.DeleteTaskRequest(id="parent")), Code.FAILED_PRECONDITION
    )
    assert "child" in error.message
    (result,) = rpc("AdminService", "batch_delete_tasks", pb.BatchTasksRequest(ids=["parent"])).results
    assert result.error.startswith("failed_precondition: ")
    assert state_of_everything() == before
