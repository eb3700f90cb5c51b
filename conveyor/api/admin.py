"""Operator endpoints: task actions, queues and limits, groups, cron, webhooks, cluster."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from conveyor import __version__
from conveyor.api import render, schemas
from conveyor.api.errors import error_body
from conveyor.api.views import ApiView
from conveyor.broker import get_broker, parse
from conveyor.broker.validation import check_queue_name, check_task_id
from conveyor.exceptions import InvalidArgument
from conveyor.models import Node, WebhookStatus, WorkerSession

TASK_ACTIONS = ("cancel", "run", "archive", "delete", "reschedule")
PAUSE_RESUME = ("pause", "resume")


IDS_FIELDS = ("ids", "process_at", "process_in")
RESCHEDULE_FIELDS = ("process_at", "process_in")


def body(request: Request, fields: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The JSON object of the request (empty when none was sent); refuse fields not in *fields*."""
    data = parse.require_object(request.data if request.data is not None else {})
    return parse.only_fields(data, fields)


def id_results(results: list[Any]) -> Response:
    out = []
    for r in results:
        item: dict[str, Any] = {"id": r.id, "ok": r.ok}
        if r.task is not None:
            item["task"] = render.task(r.task)
        if r.error is not None:
            item["error"] = error_body(r.error)
        out.append(item)
    return Response({"results": out})


def reschedule_args(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "process_at": parse.parse_time(data.get("process_at"), "process_at"),
        "process_in": parse.parse_seconds(data.get("process_in"), "process_in"),
    }


def action_param(actions: tuple[str, ...] | list[str]) -> OpenApiParameter:
    return OpenApiParameter("action", str, OpenApiParameter.PATH, enum=list(actions))


def id_param(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, schemas.PATH_PARAMS[name], OpenApiParameter.PATH, description=description)


ID_PARAM = "the task or cron entry id"


class TaskActionView(ApiView):
    @extend_schema(
        operation_id="task_action",
        parameters=[id_param("task_id", ID_PARAM), action_param([a for a in TASK_ACTIONS if a != "delete"])],
        request=schemas.RescheduleRequest,
        responses={
            200: schemas.Task,
            409: OpenApiResponse(schemas.Error, "failed_precondition: not in a state the action accepts"),
        },
        tags=["tasks"],
    )
    def post(self, request: Request, task_id: str, action: str) -> Response:
        """cancel | run | archive | reschedule one task (reschedule takes process_at or process_in)."""
        broker = get_broker()
        if action == "reschedule":
            task = broker.reschedule_task(task_id, **reschedule_args(body(request, RESCHEDULE_FIELDS)))
        elif action in ("cancel", "run", "archive"):
            body(request)  # these take no fields
            task = getattr(broker, f"{action}_task")(task_id)
        else:
            raise InvalidArgument("action", f"must be one of {', '.join(a for a in TASK_ACTIONS if a != 'delete')}")
        return Response(render.task(task))


class TaskBatchActionView(ApiView):
    @extend_schema(
        operation_id="task_batch_action",
        parameters=[action_param(TASK_ACTIONS)],
        request=schemas.IdsRequest,
        responses={200: schemas.IdResults},
        tags=["tasks"],
    )
    def post(self, request: Request, action: str) -> Response:
        """Apply cancel | run | archive | delete | reschedule to 1-1000 ids; results per id."""
        if action not in TASK_ACTIONS:
            raise InvalidArgument("action", f"must be one of {', '.join(TASK_ACTIONS)}")
        data = body(request, IDS_FIELDS if action == "reschedule" else ("ids",))
        ids = data.get("ids")
        broker = get_broker()
        if action == "reschedule":
            return id_results(broker.reschedule_tasks(ids, **reschedule_args(data)))  # type: ignore[arg-type]
        return id_results(getattr(broker, f"{action}_tasks")(ids))


def queue_json(q: Any) -> dict[str, Any]:
    return {
        "name": q.name,
        "paused": q.paused,
        "policy": q.policy,
        "counts": dict(q.counts),
        "total": q.total,
        "oldest_due_at": render.ts(q.oldest_due_at),
    }


class QueueListView(ApiView):
    resource = "queue"

    @extend_schema(operation_id="list_queues", responses={200: schemas.QueueList}, tags=["queues"])
    def get(self, request: Request) -> Response:
        """Every queue with its paused flag and counts per state, sorted by name."""
        broker = get_broker()
        rates = {r.queue: r for r in broker.rate_limits()}
        limits = {c.queue: c.limit for c in broker.concurrency_limits()}
        queues = []
        for q in broker.queue_stats():
            item = queue_json(q)
            rate = rates.get(q.name)
            item["rate_limit"] = {"rate": rate.rate, "burst": rate.burst} if rate else None
            item["concurrency_limit"] = limits.get(q.name)
            queues.append(item)
        return Response({"queues": queues})


class QueueActionView(ApiView):
    resource = "queue"

    @extend_schema(
        operation_id="queue_action",
        parameters=[action_param(PAUSE_RESUME)],
        request=None,
        responses={200: schemas.QueuePaused},
        tags=["queues"],
    )
    def post(self, request: Request, name: str, action: str) -> Response:
        """pause | resume a queue (takes effect on live dispatchers at once)."""
        if action not in PAUSE_RESUME:
            raise InvalidArgument("action", "must be pause or resume")
        body(request)
        get_broker().set_queue_paused(name, action == "pause")
        return Response({"queue": name, "paused": action == "pause"})


class QueuePolicyView(ApiView):
    resource = "queue"

    @extend_schema(
        operation_id="set_queue_policy",
        request=schemas.PolicyRequest,
        responses={200: schemas.QueuePolicy},
        tags=["queues"],
    )
    def put(self, request: Request, name: str) -> Response:
        """Set the ordering policy: fifo (default), lifo or random."""
        policy = body(request, ("policy",)).get("policy")
        get_broker().set_queue_policy(name, policy)  # type: ignore[arg-type]
        return Response({"queue": name, "policy": policy})


class RateLimitView(ApiView):
    resource = "queue"

    @extend_schema(
        operation_id="set_rate_limit", request=schemas.RateLimit, responses={200: schemas.RateLimit}, tags=["limits"]
    )
    def put(self, request: Request, name: str) -> Response:
        """Limit a queue to `rate` tasks/s with a bucket of `burst` (shared by all nodes)."""
        data = body(request, ("rate", "burst"))
        burst = data.get("burst")
        limit = get_broker().set_rate_limit(name, data.get("rate"), 1 if burst is None else burst)  # type: ignore[arg-type]
        return Response({"queue": limit.queue, "rate": limit.rate, "burst": limit.burst})

    @extend_schema(operation_id="delete_rate_limit", responses={204: None}, tags=["limits"])
    def delete(self, request: Request, name: str) -> Response:
        """Remove the queue's rate limit (none set is fine)."""
        get_broker().delete_rate_limit(check_queue_name(name))
        return Response(status=204)


class ConcurrencyLimitView(ApiView):
    resource = "queue"

    @extend_schema(
        operation_id="set_concurrency_limit",
        request=schemas.ConcurrencyLimit,
        responses={200: schemas.ConcurrencyLimit},
        tags=["limits"],
    )
    def put(self, request: Request, name: str) -> Response:
        """At most `limit` active tasks per concurrency key in this queue."""
        limit = get_broker().set_concurrency_limit(name, body(request, ("limit",)).get("limit"))  # type: ignore[arg-type]
        return Response({"queue": limit.queue, "limit": limit.limit})

    @extend_schema(operation_id="delete_concurrency_limit", responses={204: None}, tags=["limits"])
    def delete(self, request: Request, name: str) -> Response:
        """Remove the queue's concurrency limit (none set is fine)."""
        get_broker().delete_concurrency_limit(check_queue_name(name))
        return Response(status=204)


class LimitListView(ApiView):
    resource = "queue"

    @extend_schema(operation_id="list_limits", responses={200: schemas.Limits}, tags=["limits"])
    def get(self, request: Request) -> Response:
        """Every rate and concurrency limit, ordered by queue."""
        broker = get_broker()
        return Response(
            {
                "rate_limits": [{"queue": r.queue, "rate": r.rate, "burst": r.burst} for r in broker.rate_limits()],
                "concurrency_limits": [{"queue": c.queue, "limit": c.limit} for c in broker.concurrency_limits()],
            }
        )


class GroupConfigView(ApiView):
    resource = "group"
    mutating = {"PUT", "DELETE"}

    @extend_schema(operation_id="list_groups", responses={200: schemas.Groups}, tags=["groups"])
    def get(self, request: Request) -> Response:
        """Group configs (ordered by queue, group) and the groups now aggregating."""
        broker = get_broker()
        return Response(
            {
                "configs": [vars_of(c) for c in broker.group_configs()],
                "groups": [
                    {
                        "queue": g.queue,
                        "group": g.group,
                        "count": g.count,
                        "oldest": render.ts(g.oldest),
                        "newest": render.ts(g.newest),
                    }
                    for g in broker.group_stats()
                ],
            }
        )

    @extend_schema(
        operation_id="set_group_config",
        request=schemas.GroupConfigRequest,
        responses={200: schemas.GroupConfig},
        tags=["groups"],
    )
    def put(self, request: Request) -> Response:
        """Set thresholds for (queue, group); group "" is the queue's default."""
        data = body(request, ("queue", "group", "max_size", "max_delay", "grace"))
        cfg = get_broker().set_group_config(
            data.get("queue"),  # type: ignore[arg-type]
            parse.optional_text(data.get("group"), "group") or "",
            max_size=data.get("max_size"),
            max_delay=parse.parse_seconds(data.get("max_delay"), "max_delay"),
            grace=parse.parse_seconds(data.get("grace"), "grace"),
        )
        return Response(vars_of(cfg))

    @extend_schema(
        operation_id="delete_group_config",
        parameters=[
            OpenApiParameter(
                "queue", {"type": "string", "pattern": schemas.QUEUE_PATTERN, "maxLength": 100}, required=True
            ),
            OpenApiParameter("group", str, description="absent: the queue-wide default"),
        ],
        responses={204: None},
        tags=["groups"],
    )
    def delete(self, request: Request) -> Response:
        """Remove the config of (queue, group); group absent: the queue default."""
        queue = check_queue_name(request.query_params.get("queue"))
        get_broker().delete_group_config(queue, request.query_params.get("group") or "")
        return Response(status=204)


def check_name(name: str) -> str:
    """A webhook registration name (as the broker stores them)."""
    if len(name) > 100 or not re.fullmatch(schemas.NAME_PATTERN, name):
        raise InvalidArgument("name", "must be 1-100 letters, digits and . _ - (starting with a letter or digit)")
    return name


def vars_of(obj: Any) -> dict[str, Any]:
    return dict(vars(obj))


class CronListView(ApiView):
    resource = "cron"
    mutating = {"POST"}

    @extend_schema(operation_id="list_cron", responses={200: schemas.CronList}, tags=["cron"])
    def get(self, request: Request) -> Response:
        """Every cron entry, by id."""
        return Response({"entries": [render.cron_entry(e) for e in get_broker().list_cron_entries()]})

    @extend_schema(
        operation_id="upsert_cron", request=schemas.CronRequest, responses={200: schemas.CronEntry}, tags=["cron"]
    )
    def post(self, request: Request) -> Response:
        """Create or replace a cron entry (its next run restarts from now)."""
        entry = get_broker().upsert_cron_entry(parse.parse_cron(request.data))
        return Response(render.cron_entry(entry))


class CronDetailView(ApiView):
    resource = "cron"
    mutating = {"PUT", "DELETE"}

    @extend_schema(
        operation_id="get_cron",
        parameters=[id_param("entry_id", ID_PARAM)],
        responses={200: schemas.CronEntry},
        tags=["cron"],
    )
    def get(self, request: Request, entry_id: str) -> Response:
        """Read one cron entry."""
        return Response(render.cron_entry(get_broker().get_cron_entry(entry_id)))

    @extend_schema(
        operation_id="put_cron",
        parameters=[id_param("entry_id", ID_PARAM)],
        request=schemas.CronPutRequest,
        responses={200: schemas.CronEntry},
        tags=["cron"],
    )
    def put(self, request: Request, entry_id: str) -> Response:
        """Create or replace the entry with this id (the body's id, if any, must match)."""
        return Response(render.cron_entry(get_broker().upsert_cron_entry(parse.parse_cron(request.data, entry_id))))

    @extend_schema(
        operation_id="delete_cron", parameters=[id_param("entry_id", ID_PARAM)], responses={204: None}, tags=["cron"]
    )
    def delete(self, request: Request, entry_id: str) -> Response:
        """Delete an entry (an absent one is fine)."""
        get_broker().delete_cron_entry(check_task_id(entry_id, "entry_id"))
        return Response(status=204)


class CronActionView(ApiView):
    resource = "cron"

    @extend_schema(
        operation_id="cron_action",
        parameters=[id_param("entry_id", ID_PARAM), action_param(PAUSE_RESUME)],
        request=None,
        responses={200: schemas.CronEntry},
        tags=["cron"],
    )
    def post(self, request: Request, entry_id: str, action: str) -> Response:
        """pause | resume an entry (resuming does not replay missed slots)."""
        if action not in PAUSE_RESUME:
            raise InvalidArgument("action", "must be pause or resume")
        body(request)
        return Response(render.cron_entry(get_broker().set_cron_paused(entry_id, action == "pause")))


def webhook_json(reg: Any) -> dict[str, Any]:
    return render.webhook(reg, WebhookStatus.objects.filter(name=reg.name).first())


class WebhookListView(ApiView):
    resource = "webhook"
    mutating = {"POST"}

    @extend_schema(operation_id="list_webhooks", responses={200: schemas.WebhookList}, tags=["webhooks"])
    def get(self, request: Request) -> Response:
        """Registrations with their live status; secrets are never shown."""
        return Response({"webhooks": [webhook_json(r) for r in get_broker().list_webhooks()]})

    @extend_schema(
        operation_id="upsert_webhook",
        request=schemas.WebhookRequest,
        responses={200: schemas.Webhook},
        tags=["webhooks"],
    )
    def post(self, request: Request) -> Response:
        """Create or replace a registration (every field)."""
        return Response(webhook_json(get_broker().upsert_webhook(parse.parse_webhook(request.data))))


class WebhookDetailView(ApiView):
    resource = "webhook"
    mutating = {"PUT", "DELETE"}

    @extend_schema(operation_id="get_webhook", responses={200: schemas.Webhook}, tags=["webhooks"])
    def get(self, request: Request, name: str) -> Response:
        """Read one registration with its live status (never its secrets)."""
        return Response(webhook_json(get_broker().get_webhook(name)))

    @extend_schema(
        operation_id="put_webhook",
        request=schemas.WebhookPutRequest,
        responses={200: schemas.Webhook},
        tags=["webhooks"],
    )
    def put(self, request: Request, name: str) -> Response:
        """Create or replace the registration with this name (every field)."""
        return Response(webhook_json(get_broker().upsert_webhook(parse.parse_webhook(request.data, name))))

    @extend_schema(operation_id="delete_webhook", responses={204: None}, tags=["webhooks"])
    def delete(self, request: Request, name: str) -> Response:
        """Delete a registration (an absent one is fine)."""
        get_broker().delete_webhook(check_name(name))
        return Response(status=204)


class WebhookActionView(ApiView):
    resource = "webhook"

    @extend_schema(
        operation_id="webhook_action",
        parameters=[action_param(PAUSE_RESUME)],
        request=None,
        responses={200: schemas.Webhook},
        tags=["webhooks"],
    )
    def post(self, request: Request, name: str, action: str) -> Response:
        """pause | resume a registration (pausing drains its gateway)."""
        if action not in PAUSE_RESUME:
            raise InvalidArgument("action", "must be pause or resume")
        body(request)
        return Response(webhook_json(get_broker().set_webhook_paused(name, action == "pause")))


def session_json(s: WorkerSession) -> dict[str, Any]:
    return {
        "id": s.id,
        "node": s.node_id,
        "queues": s.queues,
        "concurrency": s.concurrency,
        "inflight": s.inflight,
        "labels": s.labels,
        "sdk_version": s.sdk_version,
        "remote": s.remote,
        "connected_at": render.ts(s.connected_at),
    }


class WorkerListView(ApiView):
    resource = "worker"

    @extend_schema(operation_id="list_workers", responses={200: schemas.WorkerList}, tags=["cluster"])
    def get(self, request: Request) -> Response:
        """Connected worker sessions on every node."""
        return Response({"workers": [session_json(s) for s in WorkerSession.objects.order_by("connected_at")]})


class ClusterView(ApiView):
    resource = "node"

    @extend_schema(operation_id="cluster_info", responses={200: schemas.Cluster}, tags=["cluster"])
    def get(self, request: Request) -> Response:
        """Live nodes (with the sweepers each leads) and their worker sessions."""
        nodes = []
        for n in Node.objects.order_by("started_at"):
            nodes.append(
                {
                    "id": n.id,
                    "host": n.host,
                    "port": n.port,
                    "pid": n.pid,
                    "version": n.version,
                    "started_at": render.ts(n.started_at),
                    "seen_at": render.ts(n.seen_at),
                    "leader_of": n.leader_of,
                    "sessions": [session_json(s) for s in n.sessions.order_by("connected_at")],
                }
            )
        return Response({"nodes": nodes})


class InfoView(ApiView):
    @extend_schema(operation_id="broker_info", responses={200: schemas.Info}, tags=["cluster"])
    def get(self, request: Request) -> Response:
        """Server version, database driver and time."""
        info = get_broker().info()
        return Response({"version": __version__, "driver": info["driver"], "time": render.ts(info["time"])})


class HistoryView(ApiView):
    @extend_schema(
        operation_id="stats_history",
        parameters=[
            OpenApiParameter("minutes", {"type": "integer", "minimum": 1, "maximum": 1440}, description="default 60")
        ],
        responses={200: schemas.History},
        tags=["cluster"],
    )
    def get(self, request: Request) -> Response:
        """Per queue and minute: enqueued, completed, failed and backlog (minutes with no activity are left out)."""
        from conveyor import stats

        raw = request.query_params.get("minutes", "60")
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 1440:
            raise InvalidArgument("minutes", "must be an integer from 1 to 1440")
        return Response({"series": stats.history(get_broker().now(), int(raw))})
