"""Check worker frames and build server frames (protocol v1, docs/protocol.md)."""

from __future__ import annotations

import base64
import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from conveyor.broker.validation import QUEUE_NAME, text_problem
from conveyor.sdk import protocol as p

if TYPE_CHECKING:
    from conveyor.models import Task


class FrameError(ValueError):
    """A frame the server cannot accept; the message names the problem."""


def _text(frame: dict[str, Any], key: str, what: str) -> str:
    value = frame.get(key)
    if not isinstance(value, str) or not value:
        raise FrameError(f"{frame.get('type')}: '{key}' must be {what}")
    return value


def check_hello(frame: dict[str, Any]) -> dict[str, Any]:
    queues = frame.get("queues")
    if not isinstance(queues, dict) or not queues:
        raise FrameError("hello: 'queues' must be an object of queue name to weight (at least one)")
    for name, weight in queues.items():
        if not isinstance(name, str) or len(name) > 100 or not QUEUE_NAME.match(name):
            raise FrameError(f"hello: queue name {name!r} is invalid")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000:
            raise FrameError(f"hello: weight of queue {name!r} must be an integer from 1 to 1000")
    concurrency = frame.get("concurrency")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 10_000:
        raise FrameError("hello: 'concurrency' must be an integer from 1 to 10000")
    prefetch = frame.get("prefetch", 0)
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 0 <= prefetch <= p.MAX_PREFETCH:
        raise FrameError(f"hello: 'prefetch' must be an integer from 0 to {p.MAX_PREFETCH}")
    labels = frame.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise FrameError("hello: 'labels' must be an object of string to string")
    batch_types = frame.get("batch_types") or []
    if not isinstance(batch_types, list) or not all(isinstance(t, str) and t for t in batch_types):
        raise FrameError("hello: 'batch_types' must be a list of task type names")
    for key in ("sdk_version", "min_server_version"):
        if frame.get(key) is not None and not isinstance(frame.get(key), str):
            raise FrameError(f"hello: '{key}' must be a string")
        if len(frame.get(key) or "") > 64:
            raise FrameError(f"hello: '{key}' must be at most 64 characters")
    # Stored in the session row the cluster view lists: a label PostgreSQL
    # refuses would leave a session that takes tasks but is never listed.
    texts = [("labels", t) for pair in labels.items() for t in pair]
    texts += [("batch_types", t) for t in batch_types]
    texts += [(key, frame.get(key) or "") for key in ("sdk_version", "min_server_version")]
    for key, text in texts:
        problem = text_problem(text)
        if problem is not None:
            raise FrameError(f"hello: '{key}' {problem}")
    protocol = frame.get("protocol", p.PROTOCOL_VERSION)
    if isinstance(protocol, bool) or not isinstance(protocol, int):
        raise FrameError("hello: 'protocol' must be an integer")
    return {
        "protocol": protocol,
        "queues": dict(queues),
        "concurrency": concurrency,
        "prefetch": prefetch,
        "labels": dict(labels),
        "batch_types": list(batch_types),
        "sdk_version": frame.get("sdk_version") or "",
        "min_server_version": frame.get("min_server_version") or "",
    }


def check_result(frame: dict[str, Any]) -> tuple[str, str, str, Any]:
    task_id = _text(frame, "task_id", "a task id")
    outcome = frame.get("outcome")
    if outcome not in p.OUTCOMES:
        raise FrameError(f"result: 'outcome' must be one of {', '.join(p.OUTCOMES)}")
    error = frame.get("error") or ""
    if not isinstance(error, str):
        raise FrameError("result: 'error' must be a string")
    return task_id, outcome, error, frame.get("result")


def traceback_of(frame: dict[str, Any]) -> str:
    """The traceback a failed result sends beside its error (optional, §6.1)."""
    trace = frame.get("traceback") or ""
    if not isinstance(trace, str):
        raise FrameError(f"{frame.get('type')}: 'traceback' must be a string")
    return trace


def lease_of(frame: dict[str, Any]) -> str | None:
    """The lease a result names (optional): results for an older lease are dropped."""
    lease_id = frame.get("lease_id")
    if lease_id is not None and not isinstance(lease_id, str):
        raise FrameError(f"{frame.get('type')}: 'lease_id' must be a string")
    return lease_id or None


def check_batch_result(frame: dict[str, Any]) -> tuple[str, dict[str, tuple[str, str, Any, str]]]:
    lease_id = _text(frame, "lease_id", "the batch's lease id")
    items = frame.get("results")
    if not isinstance(items, list):
        raise FrameError("batch_result: 'results' must be a list")
    results = {}
    for item in items:
        if not isinstance(item, dict):
            raise FrameError("batch_result: each result must be an object")
        member = {"type": "batch_result", **item}
        task_id, outcome, error, value = check_result(member)
        results[task_id] = (outcome, error, value, traceback_of(member))
    return lease_id, results


def check_task_ids(frame: dict[str, Any]) -> list[str]:
    """The ``task_ids`` of a ``heartbeat`` or ``started`` frame."""
    ids = frame.get("task_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise FrameError(f"{frame.get('type')}: 'task_ids' must be a list of task ids")
    return ids


def check_progress(frame: dict[str, Any]) -> tuple[str, float, str]:
    task_id = _text(frame, "task_id", "a task id")
    percent = frame.get("percent")
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not math.isfinite(percent):
        raise FrameError("progress: 'percent' must be a finite number")
    message = frame.get("message") or ""
    if not isinstance(message, str):
        raise FrameError("progress: 'message' must be a string")
    return task_id, float(percent), message


def check_credit(frame: dict[str, Any]) -> tuple[int, str | None]:
    n = frame.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
        raise FrameError("credit: 'n' must be an integer from 1 to 10000")
    queue = frame.get("queue")
    if queue is not None and not isinstance(queue, str):
        raise FrameError("credit: 'queue' must be a string")
    return n, queue


# -- server frames ----------------------------------------------------------------


def iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when is not None else None


def effective_deadline(task: Task) -> datetime | None:
    """The earlier of the task's deadline and start + timeout."""
    candidates = [task.deadline] if task.deadline else []
    if task.timeout and task.started_at:
        candidates.append(task.started_at + timedelta(seconds=task.timeout))
    return min(candidates) if candidates else None


def task_body(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "task_type": task.type,
        "payload": base64.b64encode(bytes(task.payload or b"")).decode(),
        "content_type": task.content_type,
        "attempt": task.retried + 1,
        "max_retry": task.max_retry,
        "priority": task.priority,
        "metadata": task.metadata or {},
        "deadline": iso(effective_deadline(task)),
        "enqueued_at": iso(task.enqueued_at),
    }


def dispatch_frame(task: Task, queue: str, started: bool = False) -> dict[str, Any]:
    """A ``dispatch``; *started*: the worker runs it at once, without a `started` frame (§6.6)."""
    frame = {"type": p.DISPATCH, "lease_id": task.lease_id, "queue": queue, **task_body(task)}
    if started:
        frame["started"] = True
    return frame


def batch_dispatch_frame(queue: str, group: str, tasks: list[Task], started: bool = False) -> dict[str, Any]:
    frame = {
        "type": p.BATCH_DISPATCH,
        "lease_id": tasks[0].lease_id,
        "queue": queue,
        "group": group,
        "task_type": tasks[0].type,
        "tasks": [task_body(t) for t in tasks],
    }
    if started:
        frame["started"] = True
    return frame


def error_frame(code: str, message: str) -> dict[str, Any]:
    return {"type": p.ERROR, "code": code, "message": message}
