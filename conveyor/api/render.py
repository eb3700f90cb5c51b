"""Render broker objects as JSON for the API."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from conveyor.models import CronEntry, Task, TaskAttempt, WebhookRegistration
from conveyor.sealing import encryption_of
from conveyor.states import State

# The last datetime rendered and its text. A task's timestamps, and a whole
# batch's, are mostly one object (the enqueue's "now"): rendering it once
# saves most isoformat calls of a batch answer. The tuple is replaced, never
# changed, so a thread reads a matching pair; holding the datetime keeps its
# identity from being reused.
_last_ts: tuple[datetime | None, str | None] = (None, None)

_json_decoder = json.JSONDecoder()

# A request's `Prefer: return=minimal` (RFC 7240): a batch's stored items
# answer their id and state instead of the whole task.
MINIMAL = "return=minimal"


def wants_minimal(prefer: str | None) -> bool:
    """Whether a ``Prefer`` header asks for ``return=minimal`` (among other preferences, any case)."""
    if not prefer:
        return False
    return any(p.split(";")[0].replace(" ", "").lower() == MINIMAL for p in prefer.split(","))


def ts(value: datetime | None) -> str | None:
    global _last_ts
    if value is None:
        return None
    last = _last_ts
    if last[0] is value:
        return last[1]
    text = value.isoformat().replace("+00:00", "Z")
    _last_ts = (value, text)
    return text


def decoded(body: bytes | memoryview | None, content_type: str) -> Any:
    """The JSON value of a JSON body, or None when it is not JSON."""
    if body is None or "json" not in (content_type or ""):
        return None
    try:
        # UTF-8 (what the API stores for a json payload) straight to the
        # decoder; what it refuses goes to json.loads, which also reads a
        # BOM, UTF-16 and UTF-32.
        return _json_decoder.decode(bytes(body).decode())
    except ValueError:  # UnicodeDecodeError included
        pass
    try:
        return json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError):
        return None


def task(t: Task) -> dict[str, Any]:
    payload = bytes(t.payload or b"")
    result = bytes(t.result) if t.result is not None else None
    return {
        "id": t.id,
        "queue": t.queue,
        "type": t.type,
        "state": str(t.state),
        "priority": t.priority,
        "content_type": t.content_type,
        "payload": base64.b64encode(payload).decode(),
        "json": decoded(payload, t.content_type),
        "payload_size": len(payload),
        "metadata": t.metadata or {},
        "result": decoded(result, "application/json") if result is not None else None,
        "max_retry": t.max_retry,
        "retried": t.retried,
        "attempt": t.retried + 1,
        "last_error": t.last_error,
        "enqueued_at": ts(t.enqueued_at),
        "due_at": ts(t.due_at),
        "started_at": ts(t.started_at),
        "finished_at": ts(t.finished_at),
        "updated_at": ts(t.updated_at),
        "expires_at": ts(t.expires_at),
        "deadline": ts(t.deadline),
        "timeout": t.timeout,
        "retention": t.retention,
        "unique_key": t.unique_key,
        "group": t.group,
        "concurrency_key": t.concurrency_key,
        # Only a running attempt has a holder (the row keeps the last one's: see attempts).
        "lease_holder": (t.lease_holder or None) if t.state == State.ACTIVE else None,
        "lease_expires_at": ts(t.lease_expires_at),
        "progress": t.progress,
        "progress_message": t.progress_message,
        "cancel_requested": t.cancel_requested,
        "suspect": t.suspect,
        "encryption": encryption_of(t),
    }


def task_detail(t: Task, attempts: Sequence[TaskAttempt]) -> dict[str, Any]:
    """One task as ``GET /api/v1/tasks/{id}`` shows it: with its attempts, oldest first."""
    return {**task(t), "attempts": [attempt(a) for a in attempts]}


def attempt(a: TaskAttempt) -> dict[str, Any]:
    return {
        "number": a.number,
        "started_at": ts(a.started_at),
        "finished_at": ts(a.finished_at),
        "worker": {"session": a.worker_session or None, "labels": a.worker_labels or {}},
        "node": a.node or None,
        "outcome": a.outcome,
        "error": a.seal_error or a.error,  # (why a sealed error reads empty here)
    }


def cron_entry(e: CronEntry) -> dict[str, Any]:
    payload = bytes(e.payload or b"")
    return {
        "id": e.id,
        "spec": e.spec,
        "timezone": e.timezone,
        "task_type": e.task_type,
        "queue": e.queue,
        "content_type": e.content_type,
        "payload": base64.b64encode(payload).decode(),
        "json": decoded(payload, e.content_type),
        "options": e.options,
        "paused": e.paused,
        "encryption": {"at_rest": e.key_id, "end_to_end": None, "error": e.seal_error or None},
        "next_run_at": ts(e.next_run_at),
        "last_run_at": ts(e.last_run_at),
    }


def webhook(r: WebhookRegistration, status: Any = None) -> dict[str, Any]:
    """A registration; secrets are write-only: only their count is shown."""
    out = {
        "name": r.name,
        "url": r.url,
        "queues": r.queues,
        "concurrency": r.concurrency,
        "secret_count": len(r.secrets or []),
        "batch_types": r.batch_types,
        "request_timeout": r.request_timeout,
        "paused": r.paused,
        "created_at": ts(r.created_at),
        "updated_at": ts(r.updated_at),
    }
    if status is not None:
        out["status"] = {
            "node": status.node_id,
            "breaker": status.breaker,
            "last_error": status.last_error,
            "inflight": status.inflight,
            "recent": status.recent,
            "updated_at": ts(status.updated_at),
        }
    return out
