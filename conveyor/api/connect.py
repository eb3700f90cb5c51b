"""Connect-compatible JSON paths: ``POST /conveyor.v1.<Service>/<Method>``.

Bodies are protobuf JSON: camelCase field names, durations as ``"30s"``,
RFC 3339 timestamps, base64 bytes, enum names (``TASK_STATE_PENDING``).
Requests are translated to the REST shapes and go through the same parsing,
broker and rendering; errors use Connect's body ``{"code", "message"}`` and
its HTTP status for the code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from conveyor.api import render
from conveyor.broker import get_broker, parse
from conveyor.conf import conveyor_settings
from conveyor.durations import format_duration
from conveyor.exceptions import CONNECT_HTTP_STATUS, ConveyorError, InvalidArgument, NotFound
from conveyor.tokens import auth_required, bearer_from_header, token_valid

Handler = Callable[[dict[str, Any]], dict[str, Any]]

# Fields that hold user data: never renamed, never recursed into.
OPAQUE = {"metadata", "json", "payload", "result", "options", "queues", "labels", "counts", "leaderOf"}
DURATIONS = {
    "processIn",
    "expiresIn",
    "uniqueTtl",
    "timeout",
    "retention",
    "base",
    "cap",
    "maxDelay",
    "grace",
    "requestTimeout",
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_snake(data: Any) -> Any:
    """camelCase keys -> snake_case, recursively, except inside user data."""
    if isinstance(data, list):
        return [to_snake(item) for item in data]
    if not isinstance(data, dict):
        return data
    return {snake(k): (v if k in OPAQUE else to_snake(v)) for k, v in data.items()}


def to_camel(data: Any) -> Any:
    if isinstance(data, list):
        return [to_camel(item) for item in data]
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        name = camel(key)
        out[name] = value if name in OPAQUE else to_camel(value)
    return out


def enum_value(value: Any, prefix: str) -> Any:
    """``TASK_STATE_PENDING`` -> ``pending``; plain values pass through."""
    if isinstance(value, str) and value.upper().startswith(prefix):
        return value[len(prefix) :].lower()
    return value.lower() if isinstance(value, str) and value.isupper() else value


def task_out(task: Any) -> dict[str, Any]:
    body = render.task(task)
    body["state"] = "TASK_STATE_" + body["state"].upper()
    for key in ("timeout", "retention"):
        if body[key] is not None:
            body[key] = format_duration(body[key])
    return to_camel(body)


# -- request translation ------------------------------------------------------------


def task_in(data: Any) -> dict[str, Any]:
    body = to_snake(parse.require_object(data))
    if body.get("content_type") is None and "payload" in body:
        body["content_type"] = "application/json"
    for dep in body.get("depends_on") or []:
        if isinstance(dep, dict):
            dep["on_failure"] = enum_value(dep.get("on_failure"), "DEPENDENCY_POLICY_") or "block"
            dep["on_failure"] = enum_value(dep["on_failure"], "ON_FAILURE_")
    policy = body.get("retry_policy")
    if isinstance(policy, dict) and policy.get("kind"):
        policy["kind"] = enum_value(policy["kind"], "RETRY_POLICY_")
    return body


def _ids(data: dict[str, Any]) -> list[str]:
    ids = data.get("ids", data.get("taskIds"))
    if not isinstance(ids, list):
        raise InvalidArgument("ids", "must be a list of task ids")
    return ids


def _id(data: dict[str, Any], *keys: str) -> str:
    for key in keys:
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    raise InvalidArgument(keys[0], "is required")


def _id_results(results: list[Any]) -> dict[str, Any]:
    out = []
    for r in results:
        item: dict[str, Any] = {"id": r.id, "ok": r.ok}
        if r.task is not None:
            item["task"] = task_out(r.task)
        if r.error is not None:
            item["error"] = item_error(r.error)
        out.append(item)
    return {"results": out}


# -- TaskService -----------------------------------------------------------------------


def enqueue(data: dict[str, Any]) -> dict[str, Any]:
    result = get_broker().enqueue_one(parse.parse_task(task_in(data)))
    if result.error is not None:
        raise result.error
    return {"task": task_out(result.task), "created": result.created}


def enqueue_batch(data: dict[str, Any]) -> dict[str, Any]:
    """Each item succeeds or fails alone; a refused item's error names its index."""
    from conveyor.api.tasks import enqueue_each, task_items

    results = enqueue_each(
        task_items(data),
        lambda item: parse.parse_task(task_in(item)),
        item_error,
        lambda result: {"task": task_out(result.task), "created": result.created},
    )
    return {"results": results}


def item_error(exc: ConveyorError) -> dict[str, Any]:
    exc = connect_names(exc)
    return {"code": exc.connect_code, "message": exc.message}


def connect_names(exc: ConveyorError) -> ConveyorError:
    """Name a refused field as the client wrote it (camelCase)."""
    if isinstance(exc, InvalidArgument) and exc.field:
        return InvalidArgument(camel_path(exc.field), exc.reason, index=exc.index)
    return exc


def camel_path(field: str) -> str:
    """``depends_on[0].task_id`` -> ``dependsOn[0].taskId``."""
    return re.sub(r"[A-Za-z0-9_]+", lambda m: camel(m.group(0)), field)


def enqueue_tx(data: dict[str, Any]) -> dict[str, Any]:
    specs = []
    from conveyor.api.tasks import task_items

    for i, item in enumerate(task_items(data)):
        try:
            specs.append(parse.parse_task(task_in(item)))
        except InvalidArgument as exc:
            raise InvalidArgument(exc.field, exc.reason, index=i) from None
    return {"tasks": [task_out(t) for t in get_broker().enqueue_tx(specs)]}


def get_task(data: dict[str, Any]) -> dict[str, Any]:
    return {"task": task_out(get_broker().get_task(_id(data, "id", "taskId")))}


# -- AdminService ----------------------------------------------------------------------


def list_queues(data: dict[str, Any]) -> dict[str, Any]:
    queues = []
    for q in get_broker().queue_stats():
        queues.append(
            {
                "name": q.name,
                "paused": q.paused,
                "policy": q.policy,
                "counts": {f"TASK_STATE_{k.upper()}": v for k, v in q.counts.items()},
                "total": q.total,
            }
        )
    return {"queues": queues}


def _queue(data: dict[str, Any]) -> str:
    return _id(data, "queue", "name")


def pause_queue(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().set_queue_paused(_queue(data), True)
    return {}


def resume_queue(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().set_queue_paused(_queue(data), False)
    return {}


def set_rate_limit(data: dict[str, Any]) -> dict[str, Any]:
    limit = get_broker().set_rate_limit(_queue(data), data.get("ratePerSec", data.get("rate")), data.get("burst", 1))
    return {"limit": {"queue": limit.queue, "ratePerSec": limit.rate, "burst": limit.burst}}


def delete_rate_limit(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().delete_rate_limit(_queue(data))
    return {}


def list_rate_limits(data: dict[str, Any]) -> dict[str, Any]:
    return {"limits": [{"queue": r.queue, "ratePerSec": r.rate, "burst": r.burst} for r in get_broker().rate_limits()]}


def set_concurrency_limit(data: dict[str, Any]) -> dict[str, Any]:
    limit = get_broker().set_concurrency_limit(_queue(data), data.get("max", data.get("limit")))
    return {"limit": {"queue": limit.queue, "max": limit.limit}}


def delete_concurrency_limit(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().delete_concurrency_limit(_queue(data))
    return {}


def list_concurrency_limits(data: dict[str, Any]) -> dict[str, Any]:
    return {"limits": [{"queue": c.queue, "max": c.limit} for c in get_broker().concurrency_limits()]}


def _group_json(cfg: Any) -> dict[str, Any]:
    return {
        "queue": cfg.queue,
        "group": cfg.group,
        "maxSize": cfg.max_size,
        "maxDelay": format_duration(cfg.max_delay),
        "grace": format_duration(cfg.grace),
    }


def set_group_config(data: dict[str, Any]) -> dict[str, Any]:
    cfg = get_broker().set_group_config(
        _queue(data),
        data.get("group") or "",
        max_size=data.get("maxSize"),
        max_delay=parse.parse_seconds(data.get("maxDelay"), "maxDelay"),
        grace=parse.parse_seconds(data.get("grace"), "grace"),
    )
    return {"config": _group_json(cfg)}


def delete_group_config(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().delete_group_config(_queue(data), data.get("group") or "")
    return {}


def list_group_configs(data: dict[str, Any]) -> dict[str, Any]:
    return {"configs": [_group_json(c) for c in get_broker().group_configs()]}


def list_tasks(data: dict[str, Any]) -> dict[str, Any]:
    state = enum_value(data.get("state"), "TASK_STATE_") if data.get("state") else None
    limit = data.get("limit") or data.get("pageSize")
    if isinstance(limit, str) and limit.isascii() and limit.isdigit():
        limit = int(limit)  # protobuf JSON may write integers as strings
    page = get_broker().list_tasks(
        queue=data.get("queue") or None,
        state=state or None,
        type=data.get("type") or None,
        search=data.get("search") or None,
        limit=limit,
        page_token=data.get("pageToken") or None,
    )
    return {"tasks": [task_out(t) for t in page.tasks], "nextPageToken": page.next_page_token or ""}


def _one(action: str) -> Handler:
    def handle(data: dict[str, Any]) -> dict[str, Any]:
        broker = get_broker()
        task_id = _id(data, "id", "taskId")
        if action == "delete":
            broker.delete_task(task_id)
            return {}
        if action == "reschedule":
            task = broker.reschedule_task(task_id, **_when(data))
        else:
            task = getattr(broker, f"{action}_task")(task_id)
        return {"task": task_out(task)}

    return handle


def _when(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "process_at": parse.parse_time(data.get("processAt"), "processAt"),
        "process_in": parse.parse_seconds(data.get("processIn"), "processIn"),
    }


def _batch(action: str) -> Handler:
    def handle(data: dict[str, Any]) -> dict[str, Any]:
        broker = get_broker()
        if action == "reschedule":
            return _id_results(broker.reschedule_tasks(_ids(data), **_when(data)))
        return _id_results(getattr(broker, f"{action}_tasks")(_ids(data)))

    return handle


def _cron_json(entry: Any) -> dict[str, Any]:
    return to_camel(render.cron_entry(entry))


def upsert_cron(data: dict[str, Any]) -> dict[str, Any]:
    body = to_snake(data)
    return {"entry": _cron_json(get_broker().upsert_cron_entry(parse.parse_cron(body)))}


def list_cron(data: dict[str, Any]) -> dict[str, Any]:
    return {"entries": [_cron_json(e) for e in get_broker().list_cron_entries()]}


def _cron_paused(paused: bool) -> Handler:
    def handle(data: dict[str, Any]) -> dict[str, Any]:
        return {"entry": _cron_json(get_broker().set_cron_paused(_id(data, "id"), paused))}

    return handle


def delete_cron(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().delete_cron_entry(_id(data, "id"))
    return {}


def _webhook_json(reg: Any) -> dict[str, Any]:
    body = render.webhook(reg)
    if body["request_timeout"] is not None:
        body["request_timeout"] = format_duration(body["request_timeout"])
    return to_camel(body)


def upsert_webhook(data: dict[str, Any]) -> dict[str, Any]:
    body = to_snake(data)
    return {"webhook": _webhook_json(get_broker().upsert_webhook(parse.parse_webhook(body)))}


def list_webhooks(data: dict[str, Any]) -> dict[str, Any]:
    return {"webhooks": [_webhook_json(r) for r in get_broker().list_webhooks()]}


def _webhook_paused(paused: bool) -> Handler:
    def handle(data: dict[str, Any]) -> dict[str, Any]:
        return {"webhook": _webhook_json(get_broker().set_webhook_paused(_id(data, "name"), paused))}

    return handle


def delete_webhook(data: dict[str, Any]) -> dict[str, Any]:
    get_broker().delete_webhook(_id(data, "name"))
    return {}


def list_sessions(data: dict[str, Any]) -> dict[str, Any]:
    from conveyor.api.admin import session_json
    from conveyor.models import WorkerSession

    return {"sessions": [to_camel(session_json(s)) for s in WorkerSession.objects.order_by("connected_at")]}


def cluster_info(data: dict[str, Any]) -> dict[str, Any]:
    from conveyor.models import Node

    nodes = [
        {
            "id": n.id,
            "host": n.host,
            "port": n.port,
            "startedAt": render.ts(n.started_at),
            "seenAt": render.ts(n.seen_at),
            "leaderOf": n.leader_of,
        }
        for n in Node.objects.order_by("started_at")
    ]
    return {"nodes": nodes}


def broker_info(data: dict[str, Any]) -> dict[str, Any]:
    info = get_broker().info()
    return {"version": info["version"], "driver": info["driver"], "time": render.ts(info["time"])}


# -- routing ---------------------------------------------------------------------------

TASK_SERVICE: dict[str, Handler] = {
    "Enqueue": enqueue,
    "EnqueueBatch": enqueue_batch,
    "EnqueueTx": enqueue_tx,
    "GetTask": get_task,
}

ADMIN_READS: dict[str, Handler] = {
    "ListQueues": list_queues,
    "ListRateLimits": list_rate_limits,
    "ListConcurrencyLimits": list_concurrency_limits,
    "ListGroupConfigs": list_group_configs,
    "ListTasks": list_tasks,
    "GetTask": get_task,
    "ListCronEntries": list_cron,
    "ListWebhookWorkers": list_webhooks,
    "ListWorkerSessions": list_sessions,
    "ClusterInfo": cluster_info,
    "BrokerInfo": broker_info,
}

ADMIN_WRITES: dict[str, Handler] = {
    "PauseQueue": pause_queue,
    "ResumeQueue": resume_queue,
    "SetQueueRateLimit": set_rate_limit,
    "DeleteQueueRateLimit": delete_rate_limit,
    "SetQueueConcurrencyLimit": set_concurrency_limit,
    "DeleteQueueConcurrencyLimit": delete_concurrency_limit,
    "SetGroupConfig": set_group_config,
    "DeleteGroupConfig": delete_group_config,
    **{f"{verb}Task": _one(verb.lower()) for verb in ("Cancel", "Delete", "Run", "Reschedule", "Archive")},
    **{f"{verb}TaskBatch": _batch(verb.lower()) for verb in ("Cancel", "Delete", "Run", "Reschedule", "Archive")},
    "UpsertCronEntry": upsert_cron,
    "PauseCronEntry": _cron_paused(True),
    "ResumeCronEntry": _cron_paused(False),
    "DeleteCronEntry": delete_cron,
    "UpsertWebhookWorker": upsert_webhook,
    "PauseWebhookWorker": _webhook_paused(True),
    "ResumeWebhookWorker": _webhook_paused(False),
    "DeleteWebhookWorker": delete_webhook,
}


def connect_error(code: str, message: str, status: int | None = None) -> JsonResponse:
    return JsonResponse({"code": code, "message": message}, status=status or CONNECT_HTTP_STATUS.get(code, 500))


def _authenticated(request: HttpRequest) -> bool:
    if not auth_required():
        return True
    token = bearer_from_header(request.headers.get("Authorization", ""))
    return token is not None and token_valid(token)


@csrf_exempt
def connect_call(request: HttpRequest, service: str, method: str) -> JsonResponse:
    if request.method != "POST":
        response = connect_error("unimplemented", "Connect unary calls use POST", status=405)
        response["Allow"] = "POST"
        return response
    content_type = (request.content_type or "").lower()
    if content_type not in ("application/json", ""):
        # The protocol: an unsupported codec is HTTP 415.
        return connect_error(
            "unimplemented", f"content type {content_type!r} is not supported; send application/json", status=415
        )
    handler, guard = _route(service, method)
    if handler is None:
        return connect_error("unimplemented", f"{service}/{method} is not implemented")
    if guard != "lease-token" and not _authenticated(request):
        return connect_error("unauthenticated", "a valid bearer token is required")
    if guard == "write" and conveyor_settings.READ_ONLY:
        return connect_error("permission_denied", "the server is in read-only mode")
    try:
        data = json.loads(request.body or b"{}", parse_constant=_not_json)
        if not isinstance(data, dict):
            raise InvalidArgument("", "the request body must be a JSON object")
        return JsonResponse(handler(data))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, absurd nesting
        return connect_error("invalid_argument", f"the request body is not JSON: {exc}")
    except ConveyorError as exc:
        exc = connect_names(exc)
        return connect_error(exc.connect_code, exc.message)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _route(service: str, method: str) -> tuple[Handler | None, str]:
    if service == "TaskService":
        return TASK_SERVICE.get(method), "producer"
    if service == "AdminService":
        if method in ADMIN_WRITES:
            return ADMIN_WRITES[method], "write"
        return ADMIN_READS.get(method), "read"
    if service == "WebhookService":
        from conveyor.webhooks.callbacks import WEBHOOK_SERVICE

        return WEBHOOK_SERVICE.get(method), "lease-token"
    return None, ""


__all__ = ["NotFound", "connect_call"]
