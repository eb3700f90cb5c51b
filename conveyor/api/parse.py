"""Turn JSON request bodies into broker value objects.

Only *types* are checked here (a timestamp is a timestamp, a duration is a
duration); the rules themselves live in the broker, which names the field
of anything it refuses. Keys are snake_case; the Connect aliases translate
their camelCase first.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from conveyor.broker.types import CronSpec, Dependency, RetrySpec, TaskSpec, WebhookSpec
from conveyor.durations import parse_duration
from conveyor.exceptions import InvalidArgument

TASK_FIELDS = {
    "type", "queue", "id", "json", "payload", "content_type", "priority", "max_retry", "process_at", "process_in",
    "expires_at", "expires_in", "unique_key", "unique_ttl", "unique", "group", "concurrency_key", "depends_on",
    "timeout", "deadline", "retention", "retry_policy", "metadata",
}  # fmt: skip


def require_object(data: Any, field: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidArgument(field, "must be a JSON object")
    return data


def parse_time(value: Any, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be an RFC 3339 timestamp string")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(field, f"{value!r} is not an RFC 3339 timestamp") from None
    if when.tzinfo is None:
        raise InvalidArgument(field, "must include a time zone (e.g. Z)")
    return when


def parse_seconds(value: Any, field: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidArgument(field, str(exc)) from None


def decode_base64(value: Any, field: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be a base64 string")
    try:
        # Standard or URL-safe alphabet, padding optional (protobuf JSON accepts both).
        text = value.replace("-", "+").replace("_", "/")
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(field, "is not valid base64") from None


def parse_payload(data: dict[str, Any]) -> tuple[bytes, str]:
    """``json`` (any JSON value) xor ``payload`` (base64 bytes) with ``content_type``."""
    content_type = data.get("content_type")
    if content_type is not None and not isinstance(content_type, str):
        raise InvalidArgument("content_type", "must be a string")
    if "json" in data and data.get("payload") not in (None, ""):
        raise InvalidArgument("json", "give either json or payload, not both")
    if "json" in data:
        body = json.dumps(data["json"], separators=(",", ":"), ensure_ascii=False).encode()
        return body, content_type or "application/json"
    if data.get("payload") not in (None, ""):
        return decode_base64(data["payload"], "payload"), content_type or "application/octet-stream"
    return b"", content_type or "application/json"


def parse_dependencies(value: Any) -> list[Dependency]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument("depends_on", "must be a list")
    deps = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            deps.append(Dependency(item))
        elif isinstance(item, dict):
            deps.append(Dependency(item.get("task_id"), item.get("on_failure") or "block"))  # type: ignore[arg-type]
        else:
            raise InvalidArgument(f"depends_on[{i}]", "must be a task id or {task_id, on_failure}")
    return deps


def parse_retry_policy(value: Any) -> RetrySpec | None:
    if value is None:
        return None
    data = require_object(value, "retry_policy")
    return RetrySpec(
        kind=data.get("kind"),
        base=parse_seconds(data.get("base"), "retry_policy.base"),
        cap=parse_seconds(data.get("cap"), "retry_policy.cap"),
    )


def parse_task(data: Any) -> TaskSpec:
    data = require_object(data)
    unknown = sorted(set(data) - TASK_FIELDS)
    if unknown:
        raise InvalidArgument(unknown[0], "is not a task field")
    payload, content_type = parse_payload(data)
    unique = data.get("unique", False)
    if not isinstance(unique, bool):
        raise InvalidArgument("unique", "must be true or false")
    return TaskSpec(
        type=data.get("type"),  # type: ignore[arg-type]
        queue=data.get("queue") or "default",
        id=data.get("id") or None,
        payload=payload,
        content_type=content_type,
        priority=data.get("priority"),
        max_retry=data.get("max_retry"),
        process_at=parse_time(data.get("process_at"), "process_at"),
        process_in=parse_seconds(data.get("process_in"), "process_in"),
        expires_at=parse_time(data.get("expires_at"), "expires_at"),
        expires_in=parse_seconds(data.get("expires_in"), "expires_in"),
        unique_key=data.get("unique_key") or None,
        unique_ttl=parse_seconds(data.get("unique_ttl"), "unique_ttl"),
        unique=unique,
        group=data.get("group") or None,
        concurrency_key=data.get("concurrency_key") or None,
        depends_on=parse_dependencies(data.get("depends_on")),
        timeout=parse_seconds(data.get("timeout"), "timeout"),
        deadline=parse_time(data.get("deadline"), "deadline"),
        retention=parse_seconds(data.get("retention"), "retention"),
        retry_policy=parse_retry_policy(data.get("retry_policy")),
        metadata=data.get("metadata"),
    )


def parse_task_list(data: Any) -> list[Any]:
    data = require_object(data)
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise InvalidArgument("tasks", "must be a list of tasks")
    return tasks


def parse_cron(data: Any, entry_id: str | None = None) -> CronSpec:
    data = require_object(data)
    payload, content_type = parse_payload(data)
    options = data.get("options") or {}
    return CronSpec(
        id=entry_id or data.get("id"),  # type: ignore[arg-type]
        spec=data.get("spec"),  # type: ignore[arg-type]
        task_type=data.get("task_type") or data.get("type"),  # type: ignore[arg-type]
        queue=data.get("queue") or "default",
        payload=payload,
        content_type=content_type,
        timezone=data.get("timezone") or "UTC",
        options=require_object(options, "options"),
        paused=bool(data.get("paused", False)),
    )


def parse_webhook(data: Any, name: str | None = None) -> WebhookSpec:
    data = require_object(data)
    secrets = data.get("secrets")
    if secrets is None and data.get("secret"):
        secrets = [data["secret"]]
    return WebhookSpec(
        name=name or data.get("name"),  # type: ignore[arg-type]
        url=data.get("url"),  # type: ignore[arg-type]
        queues=data.get("queues"),  # type: ignore[arg-type]
        concurrency=data.get("concurrency", 10),
        secrets=secrets or [],
        batch_types=data.get("batch_types") or [],
        request_timeout=parse_seconds(data.get("request_timeout"), "request_timeout"),
        paused=bool(data.get("paused", False)),
    )
