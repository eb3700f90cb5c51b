"""The Connect services of a real node (dev, and PostgreSQL + Redis) through
clients generated from our protos: every unary RPC in JSON and in binary,
gRPC-Web, and WatchEvents streaming a task's life."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from google.protobuf.duration_pb2 import Duration

from conveyor.v1 import service_pb2 as pb
from conveyor.v1 import task_pb2 as tpb
from tests.connect.clients import Rpc
from tests.e2e.support import NodeProcess, wait_for


def secs(n: int) -> Duration:
    return Duration(seconds=n)


def unary_tour(rpc: Rpc) -> None:
    """Each unary RPC once, asserting what it answers or changes."""
    # TaskService
    task = rpc("TaskService", "enqueue", pb.EnqueueRequest(type="tour", queue="tour", process_in=secs(3600))).task
    assert task.state == tpb.TASK_STATE_SCHEDULED
    batch = rpc("TaskService", "enqueue_batch", pb.EnqueueBatchRequest(tasks=[pb.EnqueueRequest(type="b", queue="tour"),
                                                                              pb.EnqueueRequest(type="")]))  # fmt: skip
    assert [bool(r.task.id) for r in batch.results] == [True, False] and batch.results[1].error
    tx = rpc("TaskService", "enqueue_tx", pb.EnqueueTxRequest(tasks=[pb.EnqueueRequest(type="t", queue="tour")] * 2))
    assert len(tx.tasks) == 2
    assert rpc("TaskService", "get_task", pb.GetTaskRequest(id=task.id)).task.type == "tour"
    # AdminService: queues, limits, groups
    rpc("AdminService", "pause_queue", pb.PauseQueueRequest(queue="tour"))
    (queue,) = [q for q in rpc("AdminService", "list_queues", pb.ListQueuesRequest()).queues if q.name == "tour"]
    assert (queue.paused, queue.scheduled, queue.pending) == (True, 1, 3)
    rpc("AdminService", "resume_queue", pb.ResumeQueueRequest(queue="tour"))
    rpc("AdminService", "set_queue_rate_limit", pb.SetQueueRateLimitRequest(queue="tour", rate_per_sec=5, burst=2))
    assert [r.queue for r in rpc("AdminService", "list_rate_limits", pb.ListRateLimitsRequest()).limits] == ["tour"]
    rpc("AdminService", "delete_queue_rate_limit", pb.DeleteQueueRateLimitRequest(queue="tour"))
    rpc("AdminService", "set_queue_concurrency_limit", pb.SetQueueConcurrencyLimitRequest(queue="tour", max_active=2))
    limits = rpc("AdminService", "list_concurrency_limits", pb.ListConcurrencyLimitsRequest()).limits
    assert [(c.queue, c.max_active) for c in limits] == [("tour", 2)]
    rpc("AdminService", "delete_queue_concurrency_limit", pb.DeleteQueueConcurrencyLimitRequest(queue="tour"))
    rpc("AdminService", "set_group_config", pb.SetGroupConfigRequest(queue="tour", group="g", max_size=5,
                                                                     max_delay=secs(60), grace_period=secs(5)))  # fmt: skip
    assert [c.max_size for c in rpc("AdminService", "list_group_configs", pb.ListGroupConfigsRequest()).configs] == [5]
    rpc("AdminService", "delete_group_config", pb.DeleteGroupConfigRequest(queue="tour", group="g"))
    # AdminService: tasks
    listed = rpc("AdminService", "list_tasks", pb.ListTasksRequest(queue="tour", state=tpb.TASK_STATE_SCHEDULED))
    assert [t.id for t in listed.tasks] == [task.id]
    rpc("AdminService", "run_task", pb.RunTaskRequest(id=task.id))
    rpc("AdminService", "reschedule_task", pb.RescheduleTaskRequest(id=task.id, process_in=secs(600)))
    rpc("AdminService", "archive_task", pb.ArchiveTaskRequest(id=task.id))
    rpc("AdminService", "run_task", pb.RunTaskRequest(id=task.id))
    rpc("AdminService", "cancel_task", pb.CancelTaskRequest(id=task.id))
    assert rpc("TaskService", "get_task", pb.GetTaskRequest(id=task.id)).task.state == tpb.TASK_STATE_CANCELED
    rpc("AdminService", "delete_task", pb.DeleteTaskRequest(id=task.id))
    ids = [t.id for t in tx.tasks]
    for method in ("batch_archive_tasks", "batch_run_tasks", "batch_cancel_tasks", "batch_delete_tasks"):
        assert [r.error for r in rpc("AdminService", method, pb.BatchTasksRequest(ids=ids)).results] == ["", ""]
    # AdminService: cron, webhooks, cluster
    entry = pb.CronEntry(id="tour-cron", spec="@daily", task_type="c", queue="tour")
    rpc("AdminService", "upsert_cron", pb.UpsertCronRequest(entry=entry))
    assert [e.id for e in rpc("AdminService", "list_cron", pb.ListCronRequest()).entries] == ["tour-cron"]
    for method in ("pause_cron", "resume_cron"):
        rpc("AdminService", method, getattr(pb, f"{method.title().replace('_', '')}Request")(id="tour-cron"))
    rpc("AdminService", "delete_cron", pb.DeleteCronRequest(id="tour-cron"))
    hook = pb.WebhookWorker(name="tour-hook", url="https://hooks.example.com/t", queues={"tour-hooks": 1},
                            secrets=["s3cret-for-the-tour"], paused=True)  # fmt: skip
    rpc("AdminService", "upsert_webhook_worker", pb.UpsertWebhookWorkerRequest(worker=hook))
    (listed_hook,) = rpc("AdminService", "list_webhook_workers", pb.ListWebhookWorkersRequest()).workers
    assert (listed_hook.name, list(listed_hook.secrets)) == ("tour-hook", [])
    rpc("AdminService", "resume_webhook_worker", pb.ResumeWebhookWorkerRequest(name="tour-hook"))
    rpc("AdminService", "pause_webhook_worker", pb.PauseWebhookWorkerRequest(name="tour-hook"))
    rpc("AdminService", "delete_webhook_worker", pb.DeleteWebhookWorkerRequest(name="tour-hook"))
    assert rpc("AdminService", "cluster_info", pb.ClusterInfoRequest()).nodes
    assert rpc("AdminService", "list_worker_sessions", pb.ListWorkerSessionsRequest()).sessions == []
    assert rpc("AdminService", "broker_info", pb.BrokerInfoRequest()).driver in ("sqlite", "postgresql")
    # WebhookService: a token this server never minted (tests/connect covers a real delivery)
    for method, request in (("heartbeat", pb.WebhookHeartbeatRequest(lease_token="clt1.a.b.c")),
                            ("report_result", pb.WebhookReportResultRequest(lease_token="clt1.a.b.c"))):  # fmt: skip
        with pytest.raises(ConnectError) as refused:
            rpc("WebhookService", method, request)
        assert refused.value.code == Code.UNAUTHENTICATED


@pytest.mark.parametrize("codec", ["json", "proto"])
def test_every_unary_rpc_against_a_real_node(cluster, codec):
    node = cluster.node()
    unary_tour(Rpc(node.url, codec=codec))


def test_grpc_web_clients_are_served(cluster):
    node = cluster.node()
    for codec in ("proto", "json"):
        rpc = Rpc(node.url, codec=codec, protocol=ProtocolType.GRPC_WEB)
        task = rpc("TaskService", "enqueue", pb.EnqueueRequest(type="gw", queue="grpc-web")).task
        assert rpc("TaskService", "get_task", pb.GetTaskRequest(id=task.id)).task.state == tpb.TASK_STATE_PENDING
        with pytest.raises(ConnectError) as refused:
            rpc("TaskService", "get_task", pb.GetTaskRequest(id="missing"))
        assert refused.value.code == Code.NOT_FOUND


def probe(node: NodeProcess, received: list[tpb.TaskEvent], **task: Any) -> bool:
    """Enqueue a task the watch sees; True once any event has arrived (the stream is up)."""
    node.enqueue(**task)
    time.sleep(0.2)
    return bool(received)


def watch_in_background(read: Callable[[], None]) -> None:
    def run() -> None:
        with contextlib.suppress(ConnectError):  # the node stops at the end of the test
            read()

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize("protocol", [ProtocolType.CONNECT, ProtocolType.GRPC_WEB])
def test_watch_events_streams_a_tasks_life(cluster, protocol):
    node = cluster.node()
    rpc = Rpc(node.url, codec="proto", protocol=protocol)
    received: list[tpb.TaskEvent] = []
    watch = pb.WatchEventsRequest(queues=["watch", "watch-probe"])

    def read() -> None:
        for event in rpc.stream("watch_events", watch):
            received.append(event)
            if event.event_type == tpb.TASK_EVENT_TYPE_COMPLETED:
                return

    watch_in_background(read)
    # The stream's first bytes are its first event: probe until one arrives.
    wait_for(lambda: probe(node, received, queue="watch-probe"), 15, what="the stream")
    task = rpc("TaskService", "enqueue", pb.EnqueueRequest(type="e2e", queue="watch")).task
    cluster.worker(node, queues="watch=1").wait_connected(node)
    wait_for(lambda: any(e.event_type == tpb.TASK_EVENT_TYPE_COMPLETED for e in received), 20, what="completed")
    mine = [(e.event_type, e.state) for e in received if e.id == task.id]
    assert mine == [
        (tpb.TASK_EVENT_TYPE_ENQUEUED, tpb.TASK_STATE_PENDING),
        (tpb.TASK_EVENT_TYPE_LEASED, tpb.TASK_STATE_ACTIVE),
        (tpb.TASK_EVENT_TYPE_COMPLETED, tpb.TASK_STATE_COMPLETED),
    ]
    assert {e.queue for e in received} <= {"watch", "watch-probe"}
    assert all(e.HasField("occurred_at") and e.type for e in received if e.id == task.id)


def test_watch_events_filters_by_event_type(cluster):
    node = cluster.node()
    rpc = Rpc(node.url, codec="json")
    received: list[tpb.TaskEvent] = []
    watch = pb.WatchEventsRequest(event_types=[tpb.TASK_EVENT_TYPE_SCHEDULED])

    def read() -> None:
        for event in rpc.stream("watch_events", watch):
            received.append(event)

    watch_in_background(read)
    wait_for(lambda: probe(node, received, queue="f", process_in=60), 15, what="the stream")
    node.enqueue(queue="f")  # enqueued, not scheduled: filtered out
    node.enqueue(queue="f", process_in=60)
    wait_for(lambda: len(received) >= 2, 10, what="two scheduled events")
    time.sleep(0.3)
    assert {e.event_type for e in received} == {tpb.TASK_EVENT_TYPE_SCHEDULED}


def test_no_5xx_from_malformed_bodies_on_a_real_node(cluster):
    from collections import Counter

    import httpx

    from tests.connect.test_fuzz import check, fuzz_cases

    node = cluster.node()
    cases = fuzz_cases(seed=5)
    statuses: Counter = Counter()
    with httpx.Client(base_url=node.url, timeout=30) as client:
        for path, body, content_type in cases:
            check(client.post(path, content=body, headers={"content-type": content_type}), path, body, statuses)
    print(f"fuzz on a node: {len(cases)} requests, statuses {dict(sorted(statuses.items()))}")
    assert node.proc.poll() is None and "Traceback" not in node.output()
