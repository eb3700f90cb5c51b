"""Check a ``TaskSpec`` and turn it into the column values of a new row.

Every rule raises ``InvalidArgument`` naming the field, before anything is
written, so bad input changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from conveyor.backoff import POLICIES
from conveyor.broker.types import TaskSpec
from conveyor.conf import conveyor_settings
from conveyor.exceptions import InvalidArgument
from conveyor.sdk.encryption import content_key
from conveyor.sealing import active_key_id

# \Z, not $: ``$`` also matches before a trailing newline, and other modules
# use these patterns with ``match``.
QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# No "/": an id is a path segment of the REST API (/api/v1/tasks/<id>).
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*\Z")
CONTROL = re.compile(r"[\x00-\x1f]")  # characters below 32
# What no text column can hold: NUL (PostgreSQL's text and jsonb refuse it)
# and a lone surrogate (not a character: it has no UTF-8 encoding). A JSON
# body can carry either as an escape (\u0000, \ud800).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# What ``check_text`` refuses: ``CONTROL`` or ``UNSTORABLE``.
_TEXT_REFUSED = re.compile("[\x00-\x1f\ud800-\udfff]")
# Ids that would collide with REST routes under /api/v1/tasks/.
RESERVED_IDS = ("batch", "tx", "actions", "bulk", "count")
ON_FAILURE = ("block", "continue", "cascade_cancel")
MAX_RETRY_LIMIT = 10_000
# Longest accepted duration: 100 years. Anything longer is a mistake, and
# "now + it" must stay a valid datetime (year <= 9999) wherever it is added.
MAX_SECONDS = 100 * 365.25 * 86400


def check_queue_name(name: Any, field: str = "queue") -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgument(field, "is required")
    if len(name) > 100:
        raise InvalidArgument(field, "must be at most 100 characters")
    if not QUEUE_NAME.fullmatch(name):
        raise InvalidArgument(field, "must match ^[A-Za-z0-9][A-Za-z0-9._-]*$")
    return name


def check_task_id(value: Any, field: str = "id") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(field, "must be a non-empty string")
    if len(value) > 100:
        raise InvalidArgument(field, "must be at most 100 characters")
    if not TASK_ID.fullmatch(value):
        raise InvalidArgument(field, "may contain only letters, digits and . _ : @ + = -")
    if value in RESERVED_IDS:
        raise InvalidArgument(field, f"{value!r} is reserved (it names an API route)")
    return value


def text_problem(value: str) -> str | None:
    """Why *value* cannot be stored as text, or None."""
    found = UNSTORABLE.search(value)
    if found is None:
        return None
    return "must not contain NUL characters" if found.group() == "\x00" else "must not contain lone surrogates"


def check_storable(value: str, field: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise InvalidArgument(field, problem)
    return value


def scrub_text(value: str) -> str:
    """*value* with NUL and lone surrogates replaced by U+FFFD: for text that must be kept, not refused."""
    return UNSTORABLE.sub("\ufffd", value)


def check_text(value: Any, field: str, max_len: int, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise InvalidArgument(field, "is required")
        return None
    if not isinstance(value, str):
        raise InvalidArgument(field, "must be a string")
    if len(value) > max_len:
        raise InvalidArgument(field, f"must be at most {max_len} characters")
    if _TEXT_REFUSED.search(value) is None:  # (one scan for the common case, clean text)
        return value
    if CONTROL.search(value):
        raise InvalidArgument(field, "must not contain control characters")
    return check_storable(value, field)


def check_int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, "must be an integer")
    if not lo <= value <= hi:
        raise InvalidArgument(field, f"must be between {lo} and {hi}")
    return value


def check_seconds(value: Any, field: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(field, "must be a number of seconds")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidArgument(field, "must be a finite number")
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidArgument(field, "must be positive" if not allow_zero else "must not be negative")
    if value > MAX_SECONDS:
        raise InvalidArgument(field, f"must be at most {MAX_SECONDS:.0f} seconds (100 years)")
    return value


def check_time(value: Any, field: str) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidArgument(field, "must be a timestamp")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(field, "must include a time zone")
    return value


def check_metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgument("metadata", "must be an object of string to string")
    if len(value) > 100:
        raise InvalidArgument("metadata", "must have at most 100 entries")
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 200:
            raise InvalidArgument("metadata", "keys must be non-empty strings of at most 200 characters")
        problem = text_problem(key)
        if problem is not None:
            raise InvalidArgument("metadata", f"keys {problem}")
        if not isinstance(item, str) or len(item) > 4096:
            raise InvalidArgument(f"metadata.{key}", "must be a string of at most 4096 characters")
        check_storable(item, f"metadata.{key}")
    return dict(value)


def _check_exclusive(spec: TaskSpec, a: str, b: str) -> None:
    if getattr(spec, a) is not None and getattr(spec, b) is not None:
        raise InvalidArgument(a, f"cannot be combined with {b}")


def _due_at(spec: TaskSpec, now: datetime) -> datetime:
    _check_exclusive(spec, "process_at", "process_in")
    if spec.process_at is not None:
        return check_time(spec.process_at, "process_at")
    if spec.process_in is not None:
        return now + timedelta(seconds=check_seconds(spec.process_in, "process_in", allow_zero=True))
    return now


def _expires_at(spec: TaskSpec, now: datetime) -> datetime | None:
    _check_exclusive(spec, "expires_at", "expires_in")
    if spec.expires_at is not None:
        when = check_time(spec.expires_at, "expires_at")
        if when <= now:
            raise InvalidArgument("expires_at", "must be in the future")
        return when
    if spec.expires_in is not None:
        return now + timedelta(seconds=check_seconds(spec.expires_in, "expires_in"))
    return None


def _priority(value: Any) -> int:
    if value is None or value == 0:
        return conveyor_settings.DEFAULT_PRIORITY
    return check_int(value, "priority", 1, 9)


def _unique(spec: TaskSpec, payload: bytes, now: datetime) -> tuple[str | None, datetime | None]:
    key = check_text(spec.unique_key, "unique_key", 255)
    if key is None and spec.unique:
        key = content_key(spec.type, payload)
    if spec.unique_ttl is None:
        return key, None
    if key is None:
        raise InvalidArgument("unique_ttl", "needs unique_key or unique=true")
    return key, now + timedelta(seconds=check_seconds(spec.unique_ttl, "unique_ttl"))


def _retry(spec: TaskSpec) -> tuple[str, float | None, float | None]:
    policy = spec.retry_policy
    if policy is None:
        return "", None, None
    kind = policy.kind or ""
    if kind and kind not in POLICIES:
        raise InvalidArgument("retry_policy.kind", f"must be one of {', '.join(POLICIES)}")
    base = None if policy.base is None else check_seconds(policy.base, "retry_policy.base")
    cap = None if policy.cap is None else check_seconds(policy.cap, "retry_policy.cap")
    return kind, base, cap


def check_dependencies(spec: TaskSpec) -> list[tuple[str, str]]:
    if not spec.depends_on:
        return []
    deps = list(spec.depends_on)
    if len(deps) > conveyor_settings.MAX_DEPENDENCIES:
        raise InvalidArgument("depends_on", f"must have at most {conveyor_settings.MAX_DEPENDENCIES} entries")
    seen: set[str] = set()
    out = []
    for i, dep in enumerate(deps):
        task_id = check_task_id(getattr(dep, "task_id", None), f"depends_on[{i}].task_id")
        policy = getattr(dep, "on_failure", None) or "block"
        if policy not in ON_FAILURE:
            raise InvalidArgument(f"depends_on[{i}].on_failure", f"must be one of {', '.join(ON_FAILURE)}")
        if task_id in seen:
            raise InvalidArgument(f"depends_on[{i}].task_id", f"{task_id} is listed twice")
        if spec.id is not None and task_id == spec.id:
            raise InvalidArgument(f"depends_on[{i}].task_id", "a task cannot depend on itself")
        seen.add(task_id)
        out.append((task_id, policy))
    return out


def task_fields(spec: TaskSpec, now: datetime) -> dict[str, Any]:
    """Validate *spec*; return the model fields of the new row (no id, no state)."""
    if not isinstance(spec, TaskSpec):
        raise InvalidArgument("", "expected a task")
    task_type = check_text(spec.type, "type", 200, required=True)
    queue = check_queue_name(spec.queue if spec.queue is not None else "default")
    if spec.id is not None:
        check_task_id(spec.id)
    payload = spec.payload if spec.payload is not None else b""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidArgument("payload", "must be bytes")
    payload = bytes(payload)
    if len(payload) > conveyor_settings.PAYLOAD_MAX_BYTES:
        raise InvalidArgument("payload", f"must be at most {conveyor_settings.PAYLOAD_MAX_BYTES} bytes")
    content_type = check_text(spec.content_type or "application/json", "content_type", 100)
    max_retry = conveyor_settings.MAX_RETRY if spec.max_retry is None else spec.max_retry
    group = check_text(spec.group, "group", 200)
    concurrency_key = check_text(spec.concurrency_key, "concurrency_key", 200)
    if group is not None and (spec.process_at is not None or spec.process_in is not None):
        raise InvalidArgument("group", "cannot be combined with a delay (process_at / process_in)")
    if group is not None and concurrency_key is not None:
        raise InvalidArgument("group", "cannot be combined with concurrency_key")
    unique_key, unique_until = _unique(spec, payload, now)
    retry_kind, retry_base, retry_cap = _retry(spec)
    deadline = None if spec.deadline is None else check_time(spec.deadline, "deadline")
    if deadline is not None and deadline <= now:
        raise InvalidArgument("deadline", "must be in the future")
    return {
        "queue": queue,
        "type": task_type,
        "payload": payload,
        "content_type": content_type,
        "metadata": check_metadata(spec.metadata),
        "priority": _priority(spec.priority),
        "max_retry": check_int(max_retry, "max_retry", 0, MAX_RETRY_LIMIT),
        "due_at": _due_at(spec, now),
        "expires_at": _expires_at(spec, now),
        "unique_key": unique_key,
        "unique_until": unique_until,
        "group": group,
        "concurrency_key": concurrency_key,
        "timeout": None if spec.timeout is None else check_seconds(spec.timeout, "timeout"),
        "deadline": deadline,
        "retention": None if spec.retention is None else check_seconds(spec.retention, "retention", allow_zero=True),
        "retry_kind": retry_kind,
        "retry_base": retry_base,
        "retry_cap": retry_cap,
        # Sealed under the active key, if the node has a keyring (the store
        # seals; uniqueness above was derived from the plaintext).
        "key_id": active_key_id(),
    }
