"""AdminService's unary RPCs: each a sync function of its request message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.api.render import ts
from conveyor.broker import get_broker
from conveyor.connect import convert
from conveyor.connect.errors import fields_named, item_error
from conveyor.connect.tasks import get_task, required
from conveyor.v1 import service_pb2 as pb

# Methods that change nothing: allowed in read-only mode.
READS = {
    "ListQueues", "ListRateLimits", "ListConcurrencyLimits", "ListGroupConfigs", "ListTasks", "ListCron",
    "ClusterInfo", "ListWebhookWorkers", "ListWorkerSessions", "BrokerInfo", "WatchEvents",
}  # fmt: skip
COUNTED = set(pb.QueueInfo.DESCRIPTOR.fields_by_name) - {"name", "paused"}  # the states QueueInfo counts


def list_queues(request: pb.ListQueuesRequest) -> pb.ListQueuesResponse:
    return pb.ListQueuesResponse(
        queues=[
            pb.QueueInfo(name=q.name, paused=q.paused, **{k: v for k, v in q.counts.items() if k in COUNTED})
            for q in get_broker().queue_stats()
        ]
    )


def pause_queue(request: pb.PauseQueueRequest) -> pb.PauseQueueResponse:
    get_broker().set_queue_paused(request.queue, True)
    return pb.PauseQueueResponse()


def resume_queue(request: pb.ResumeQueueRequest) -> pb.ResumeQueueResponse:
    get_broker().set_queue_paused(request.queue, False)
    return pb.ResumeQueueResponse()


def list_rate_limits(request: pb.ListRateLimitsRequest) -> pb.ListRateLimitsResponse:
    limits = get_broker().rate_limits()
    return pb.ListRateLimitsResponse(
        limits=[pb.RateLimitInfo(queue=r.queue, rate_per_sec=r.rate, burst=r.burst) for r in limits]
    )


def set_rate_limit(request: pb.SetQueueRateLimitRequest) -> pb.SetQueueRateLimitResponse:
    with fields_named({"rate": "rate_per_sec"}):
        get_broker().set_rate_limit(request.queue, request.rate_per_sec, request.burst)
    return pb.SetQueueRateLimitResponse()


def delete_rate_limit(request: pb.DeleteQueueRateLimitRequest) -> pb.DeleteQueueRateLimitResponse:
    get_broker().delete_rate_limit(request.queue)
    return pb.DeleteQueueRateLimitResponse()


def list_concurrency_limits(request: pb.ListConcurrencyLimitsRequest) -> pb.ListConcurrencyLimitsResponse:
    limits = get_broker().concurrency_limits()
    return pb.ListConcurrencyLimitsResponse(
        limits=[pb.ConcurrencyLimitInfo(queue=c.queue, max_active=c.limit) for c in limits]
    )


def set_concurrency_limit(request: pb.SetQueueConcurrencyLimitRequest) -> pb.SetQueueConcurrencyLimitResponse:
    with fields_named({"limit": "max_active"}):
        get_broker().set_concurrency_limit(request.queue, request.max_active)
    return pb.SetQueueConcurrencyLimitResponse()


def delete_concurrency_limit(request: pb.DeleteQueueConcurrencyLimitRequest) -> pb.DeleteQueueConcurrencyLimitResponse:
    get_broker().delete_concurrency_limit(request.queue)
    return pb.DeleteQueueConcurrencyLimitResponse()


def list_group_configs(request: pb.ListGroupConfigsRequest) -> pb.ListGroupConfigsResponse:
    configs = [
        pb.GroupConfigInfo(
            queue=c.queue,
            group=c.group,
            max_size=c.max_size,
            max_delay=convert.duration(c.max_delay),
            grace_period=convert.duration(c.grace),
        )
        for c in get_broker().group_configs()
    ]
    return pb.ListGroupConfigsResponse(configs=configs)


def set_group_config(request: pb.SetGroupConfigRequest) -> pb.SetGroupConfigResponse:
    with fields_named({"grace": "grace_period"}):
        get_broker().set_group_config(
            request.queue,
            request.group,
            max_size=request.max_size or None,
            max_delay=convert.seconds(request, "max_delay"),
            grace=convert.seconds(request, "grace_period"),
        )
    return pb.SetGroupConfigResponse()


def delete_group_config(request: pb.DeleteGroupConfigRequest) -> pb.DeleteGroupConfigResponse:
    get_broker().delete_group_config(request.queue, request.group)
    return pb.DeleteGroupConfigResponse()


def list_tasks(request: pb.ListTasksRequest) -> pb.ListTasksResponse:
    page = get_broker().list_tasks(
        queue=request.queue or None,
        state=convert.state_filter(request.state),
        limit=request.limit or None,
        page_token=request.page_token or None,
    )
    return pb.ListTasksResponse(
        tasks=[convert.task_info(t) for t in page.tasks], next_page_token=page.next_page_token or ""
    )


def by_key(action: str, key: str, response: type[Any], *args: Any) -> Callable[[Any], Any]:
    """An RPC that calls ``Broker.<action>`` on the object its request names by *key* (``id``, ``name``)."""

    def handle(request: Any) -> Any:
        getattr(get_broker(), action)(required(getattr(request, key), key), *args)
        return response()

    return handle


def reschedule_task(request: pb.RescheduleTaskRequest) -> pb.RescheduleTaskResponse:
    get_broker().reschedule_task(
        required(request.id, "id"),
        process_at=convert.when(request, "process_at"),
        process_in=convert.seconds(request, "process_in"),
    )
    return pb.RescheduleTaskResponse()


def batch(action: str) -> Callable[[pb.BatchTasksRequest], pb.BatchTasksResponse]:
    def handle(request: pb.BatchTasksRequest) -> pb.BatchTasksResponse:
        results = getattr(get_broker(), f"{action}_tasks")(list(request.ids))
        return pb.BatchTasksResponse(
            results=[pb.TaskActionResult(id=r.id, error=item_error(r.error) if r.error else "") for r in results]
        )

    return handle


def list_cron(request: pb.ListCronRequest) -> pb.ListCronResponse:
    return pb.ListCronResponse(entries=[convert.cron_entry(e) for e in get_broker().list_cron_entries()])


def upsert_cron(request: pb.UpsertCronRequest) -> pb.UpsertCronResponse:
    with fields_named({"id": "entry.id", "spec": "entry.spec", "task_type": "entry.task_type",
                       "queue": "entry.queue", "options": "entry.options"}):  # fmt: skip
        get_broker().upsert_cron_entry(convert.cron_spec(request.entry))
    return pb.UpsertCronResponse()


def cluster_info(request: pb.ClusterInfoRequest) -> pb.ClusterInfoResponse:
    from conveyor.models import Node

    nodes = [
        pb.NodeInfo(address=f"{n.host}:{n.port}", started_at=convert.timestamp(n.started_at))
        for n in Node.objects.order_by("started_at")
    ]
    return pb.ClusterInfoResponse(nodes=nodes)


def list_webhooks(request: pb.ListWebhookWorkersRequest) -> pb.ListWebhookWorkersResponse:
    return pb.ListWebhookWorkersResponse(workers=[convert.webhook_worker(r) for r in get_broker().list_webhooks()])


def upsert_webhook(request: pb.UpsertWebhookWorkerRequest) -> pb.UpsertWebhookWorkerResponse:
    with fields_named({name: f"worker.{name}" for name in pb.WebhookWorker.DESCRIPTOR.fields_by_name}):
        get_broker().upsert_webhook(convert.webhook_spec(request.worker))
    return pb.UpsertWebhookWorkerResponse()


def list_sessions(request: pb.ListWorkerSessionsRequest) -> pb.ListWorkerSessionsResponse:
    from conveyor.models import WorkerSession

    sessions = [
        pb.WorkerSession(
            id=s.id,
            queues=sorted(s.queues or {}),
            concurrency=s.concurrency,
            sdk_version=s.sdk_version or "",
            connected_at=convert.timestamp(s.connected_at),
        )
        for s in WorkerSession.objects.order_by("connected_at")
    ]
    return pb.ListWorkerSessionsResponse(sessions=sessions)


def broker_info(request: pb.BrokerInfoRequest) -> pb.BrokerInfoResponse:
    info = get_broker().info()
    metrics = {"version": info["version"], "database": info["database"], "time": ts(info["time"]) or ""}
    return pb.BrokerInfoResponse(driver=info["driver"], metrics=metrics)


ADMIN_SERVICE: dict[str, Callable[[Any], Any]] = {
    "list_queues": list_queues,
    "pause_queue": pause_queue,
    "resume_queue": resume_queue,
    "list_rate_limits": list_rate_limits,
    "set_queue_rate_limit": set_rate_limit,
    "delete_queue_rate_limit": delete_rate_limit,
    "list_concurrency_limits": list_concurrency_limits,
    "set_queue_concurrency_limit": set_concurrency_limit,
    "delete_queue_concurrency_limit": delete_concurrency_limit,
    "list_group_configs": list_group_configs,
    "set_group_config": set_group_config,
    "delete_group_config": delete_group_config,
    "list_tasks": list_tasks,
    "cancel_task": by_key("cancel_task", "id", pb.CancelTaskResponse),
    "delete_task": by_key("delete_task", "id", pb.DeleteTaskResponse),
    "run_task": by_key("run_task", "id", pb.RunTaskResponse),
    "reschedule_task": reschedule_task,
    "archive_task": by_key("archive_task", "id", pb.ArchiveTaskResponse),
    **{f"batch_{verb}_tasks": batch(verb) for verb in ("delete", "run", "cancel", "archive")},
    "list_cron": list_cron,
    "upsert_cron": upsert_cron,
    "pause_cron": by_key("set_cron_paused", "id", pb.PauseCronResponse, True),
    "resume_cron": by_key("set_cron_paused", "id", pb.ResumeCronResponse, False),
    "delete_cron": by_key("delete_cron_entry", "id", pb.DeleteCronResponse),
    "cluster_info": cluster_info,
    "list_webhook_workers": list_webhooks,
    "upsert_webhook_worker": upsert_webhook,
    "pause_webhook_worker": by_key("set_webhook_paused", "name", pb.PauseWebhookWorkerResponse, True),
    "resume_webhook_worker": by_key("set_webhook_paused", "name", pb.ResumeWebhookWorkerResponse, False),
    "delete_webhook_worker": by_key("delete_webhook", "name", pb.DeleteWebhookWorkerResponse),
    "list_worker_sessions": list_sessions,
    "broker_info": broker_info,
}

__all__ = ["ADMIN_SERVICE", "READS", "get_task"]
