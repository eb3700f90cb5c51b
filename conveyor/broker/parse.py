"""Turn JSON request bodies into broker value objects.

Only *types* are checked here (a timestamp is a timestamp, a duration is a
duration); the rules themselves live in the broker, which names the field
of anything it refuses. Keys are snake_case; the Connect aliases translate
their camelCase first.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from conveyor.broker import request
from conveyor.broker.types import CronSpec, Dependency, RetrySpec, TaskSpec, WebhookSpec
from conveyor.durations import parse_duration
from conveyor.exceptions import InvalidArgument
from conveyor.sdk.protocol import compact_json

CRON_FIELDS = {
    "id", "spec", "task_type", "type", "queue", "json", "payload", "content_type", "timezone", "options", "paused",
}  # fmt: skip
WEBHOOK_FIELDS = {
    "name", "url", "queues", "concurrency", "secrets", "secret", "batch_types", "request_timeout", "paused",
}  # fmt: skip


def require_object(data: Any, field: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidArgument(field, "must be a JSON object")
    return data


def only_fields(data: dict[str, Any], allowed: Iterable[str], where: str = "") -> dict[str, Any]:
    """Refuse a key not in *allowed* (a typo must not pass silently as a default)."""
    if not isinstance(allowed, (set, frozenset)):
        allowed = set(allowed)
    elif data.keys() <= allowed:  # (the common case, one comparison: enqueue reads every task's keys)
        return data
    unknown = sorted(set(data) - allowed)
    if unknown:
        name = unknown[0]
        hint = snake_case(name)
        message = "is not a field here" if not allowed else "is not a known field"
        if hint != name and hint in allowed:
            message += f" (did you mean {hint}?)"
        raise InvalidArgument(f"{where}.{name}" if where else name, message)
    return data


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def parse_bool(value: Any, field: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgument(field, "must be true or false")
    return value


def optional_text(value: Any, field: str) -> Any:
    """A string field where "" and null mean absent; other types are refused here."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be a string")
    return value


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
        try:
            body = compact_json(data["json"]).encode()
        except UnicodeEncodeError:
            # A lone surrogate (a \ud800 escape): JSON text must be UTF-8, and it has no encoding.
            raise InvalidArgument("json", "must not contain lone surrogates") from None
        except ValueError:
            # A number past a double's range (1e400) reads as inf: stored, it would be
            # "Infinity", which is not JSON, and no reader of the payload could parse it.
            raise InvalidArgument("json", "must not contain numbers out of range (such as 1e400)") from None
        return body, content_type or "application/json"
    if data.get("payload") not in (None, ""):
        return decode_base64(data["payload"], "payload"), content_type or "application/octet-stream"
    return b"", content_type or "application/json"


def parse_dependencies(value: Any, field: str = "depends_on") -> list[Dependency]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidArgument(field, "must be a list")
    deps = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            deps.append(Dependency(item))
        elif isinstance(item, dict):
            only_fields(item, request.names(request.DEPENDENCY), f"{field}[{i}]")
            deps.append(Dependency(item.get("task_id"), item.get("on_failure") or "block"))  # type: ignore[arg-type]
        else:
            raise InvalidArgument(f"{field}[{i}]", "must be a task id or {task_id, on_failure}")
    return deps


def parse_retry_policy(value: Any, field: str = "retry_policy") -> RetrySpec | None:
    if value is None:
        return None
    data = only_fields(require_object(value, field), request.names(request.RETRY_POLICY), field)
    return RetrySpec(**_read(request.RETRY_POLICY, data, f"{field}."))


def _as_given(value: Any, field: str) -> Any:
    return value  # the broker checks it (and names the field)


def _or_absent(value: Any, field: str) -> Any:
    return None if value is None or value == "" else value  # the broker checks the rest


# How each kind of request field (conveyor/broker/request.py) is read from JSON.
READERS: dict[str, Callable[[Any, str], Any]] = {
    "text": _or_absent,
    "name": optional_text,
    "integer": _as_given,
    "choice": _as_given,
    "time": parse_time,
    "duration": parse_seconds,
    "positive_duration": parse_seconds,
    "boolean": parse_bool,
    "dependencies": parse_dependencies,
    "retry_policy": parse_retry_policy,
    "metadata": _as_given,
}
# Read together by ``parse_payload``: the body and its content type.
PAYLOAD_FIELDS = ("json", "payload", "content_type")
_TASK_VALUES = tuple(f for f in request.TASK if f.name not in PAYLOAD_FIELDS)


def _read(fields: Iterable[request.Field], data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Each field's value in *data*, read by its kind (absent keys read as null)."""
    return {f.name: READERS[f.kind](data.get(f.name), prefix + f.name) for f in fields}


# ``_read(_TASK_VALUES, ...)`` for every task of a request, worked out once: each
# field's reader, and what it reads an absent (null) field as. A task names
# few of its fields; the others take that value without a call, except where
# it is made anew each time (a list: ``depends_on``).
_TASK_READERS = tuple((f.name, READERS[f.kind]) for f in _TASK_VALUES)
_TASK_ABSENT = {name: reader(None, name) for name, reader in _TASK_READERS}
_TASK_FRESH = frozenset(name for name, reader in _TASK_READERS if reader(None, name) is not _TASK_ABSENT[name])
_TASK_NAMES = frozenset(request.TASK_FIELDS)


def _read_task(data: dict[str, Any]) -> dict[str, Any]:
    """``_read(_TASK_VALUES, data)``: the same values, the same first error (fields in the same order)."""
    values = _TASK_ABSENT.copy()
    for name, reader in _TASK_READERS:
        value = data.get(name)
        if value is not None:
            values[name] = reader(value, name)
        elif name in _TASK_FRESH:
            values[name] = reader(None, name)
    return values


def parse_task(data: Any) -> TaskSpec:
    data = only_fields(require_object(data), _TASK_NAMES)
    payload, content_type = parse_payload(data)
    values = _read_task(data)
    values["queue"] = values["queue"] or "default"
    return TaskSpec(payload=payload, content_type=content_type, **values)


def parse_task_list(data: Any) -> list[Any]:
    data = only_fields(require_object(data), ("tasks",))
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise InvalidArgument("tasks", "must be a list of tasks")
    return tasks


def parse_cron(data: Any, entry_id: str | None = None) -> CronSpec:
    data = only_fields(require_object(data), CRON_FIELDS)
    payload, content_type = parse_payload(data)
    options = cron_options(data.get("options"))
    return CronSpec(
        id=same_name(entry_id, data.get("id"), "id"),  # type: ignore[arg-type]
        spec=data.get("spec"),  # type: ignore[arg-type]
        task_type=data.get("task_type") or data.get("type"),  # type: ignore[arg-type]
        queue=optional_text(data.get("queue"), "queue") or "default",
        payload=payload,
        content_type=content_type,
        timezone=optional_text(data.get("timezone"), "timezone") or "UTC",
        options=options,
        paused=parse_bool(data.get("paused"), "paused"),
    )


CRON_DURATIONS = ("timeout", "retention", "expires_in", "unique_ttl")


def cron_options(value: Any) -> dict[str, Any]:
    """Task options of a cron entry, durations ("10m") read as seconds; the broker checks the rest."""
    options = dict(require_object(value or {}, "options"))
    for key in CRON_DURATIONS:
        if key in options:
            options[key] = parse_seconds(options[key], f"options.{key}")
            if options[key] is None:
                del options[key]
    return options


def same_name(from_path: str | None, from_body: Any, field: str) -> Any:
    """The id/name of a PUT comes from the path; a different one in the body is refused."""
    if from_path is None:
        return from_body
    if from_body not in (None, "", from_path):
        raise InvalidArgument(field, f"must match the path ({from_path!r}) or be left out")
    return from_path


def parse_webhook(data: Any, name: str | None = None) -> WebhookSpec:
    data = only_fields(require_object(data), WEBHOOK_FIELDS)
    secrets = data.get("secrets")
    if secrets is not None and not isinstance(secrets, list):
        raise InvalidArgument("secrets", "must be a list of strings (newest first)")
    if data.get("secret") not in (None, ""):
        if secrets is not None:
            raise InvalidArgument("secret", "give either secrets or secret, not both")
        secrets = [data["secret"]]
    batch_types = data.get("batch_types")
    if batch_types is not None and not isinstance(batch_types, list):
        raise InvalidArgument("batch_types", "must be a list of task types")
    concurrency = data.get("concurrency")
    return WebhookSpec(
        name=same_name(name, data.get("name"), "name"),  # type: ignore[arg-type]
        url=data.get("url"),  # type: ignore[arg-type]
        queues=data.get("queues"),  # type: ignore[arg-type]
        concurrency=10 if concurrency is None else concurrency,
        secrets=secrets or [],
        batch_types=batch_types or [],
        request_timeout=parse_seconds(data.get("request_timeout"), "request_timeout"),
        paused=parse_bool(data.get("paused"), "paused"),
    )
