"""Between conveyor.v1 messages and the broker's value objects and rows.

A proto3 field at its zero value is "not set": the broker's default applies
(priority 0, max_retry 0, an empty queue). Messages (Duration, Timestamp,
RetryPolicy) are set when present. Field names in errors are the broker's;
``conveyor.connect.errors`` writes them as the JSON names of the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from conveyor.broker.types import CronSpec, Dependency, RetrySpec, TaskSpec, WebhookSpec
from conveyor.exceptions import InvalidArgument
from conveyor.v1 import service_pb2 as pb
from conveyor.v1 import task_pb2 as tpb

POLICIES = {
    tpb.DEPENDENCY_FAILURE_POLICY_UNSPECIFIED: "block",
    tpb.DEPENDENCY_FAILURE_POLICY_BLOCK: "block",
    tpb.DEPENDENCY_FAILURE_POLICY_CASCADE_CANCEL: "cascade_cancel",
    tpb.DEPENDENCY_FAILURE_POLICY_CONTINUE: "continue",
}
STRATEGIES = {
    tpb.RETRY_STRATEGY_UNSPECIFIED: None,
    tpb.RETRY_STRATEGY_EXPONENTIAL: "exponential",
    tpb.RETRY_STRATEGY_LINEAR: "linear",
    tpb.RETRY_STRATEGY_FIXED: "fixed",
}
STATES = {name: tpb.TaskState.Value(f"TASK_STATE_{name.upper()}") for name in (
    "scheduled", "pending", "active", "retry", "completed", "archived", "canceled", "aggregating", "blocked",
)}  # fmt: skip
STATE_NAMES = {number: name for name, number in STATES.items()}
# Options a cron entry's TaskOptions may set (the rest are decided at each fire).
CRON_OPTIONS = ("max_retry", "timeout", "retention", "unique_ttl", "priority", "group", "concurrency_key")


def enum_value(table: Mapping[int, Any], number: int, field: str) -> Any:
    """A known enum number's meaning; binary messages may carry numbers the contract has not."""
    if number not in table:
        raise InvalidArgument(field, f"{number} is not a known value")
    return table[number]


def seconds(message: Message, name: str) -> float | None:
    if not message.HasField(name):
        return None
    value: Duration = getattr(message, name)
    return value.seconds + value.nanos / 1e9


def when(message: Message, name: str) -> datetime | None:
    if not message.HasField(name):
        return None
    value: Timestamp = getattr(message, name)
    try:
        return value.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):  # binary can carry any seconds; JSON is range-checked
        raise InvalidArgument(name, "is out of the timestamp range") from None


def timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    out = Timestamp()
    out.FromDatetime(value)
    return out


def duration(value: float | None) -> Duration | None:
    if value is None:
        return None
    out = Duration()
    out.FromNanoseconds(round(value * 1e9))
    return out


def refuse_nul(message: Message, path: str = "") -> None:
    """Refuse a NUL character in any string of *message*: PostgreSQL's text cannot hold one."""
    for field, value in message.ListFields():
        name = f"{path}{field.name}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            items = [(f"{name}.{k}", k, v) for k, v in value.items()]
            for where, key, item in items:
                if isinstance(key, str) and "\x00" in key:
                    raise InvalidArgument(name, "must not contain NUL characters")
                check_value(item, where)
        elif field.is_repeated:
            for i, item in enumerate(value):
                check_value(item, f"{name}[{i}]")
        else:
            check_value(value, name)


def check_value(value: Any, where: str) -> None:
    if isinstance(value, str) and "\x00" in value:
        raise InvalidArgument(where, "must not contain NUL characters")
    if isinstance(value, Message):
        refuse_nul(value, f"{where}.")


# -- tasks -----------------------------------------------------------------------------


def task_spec(request: pb.EnqueueRequest) -> TaskSpec:
    return TaskSpec(
        type=request.type,
        queue=request.queue or "default",
        id=request.task_id or None,
        payload=request.payload,
        content_type=request.content_type or "application/json",
        metadata=dict(request.metadata) or None,
        max_retry=request.max_retry or None,
        timeout=seconds(request, "timeout"),
        deadline=when(request, "deadline"),
        process_at=when(request, "process_at"),
        process_in=seconds(request, "process_in"),
        unique_key=request.unique_key or None,
        unique_ttl=seconds(request, "unique_ttl"),
        priority=request.priority or None,
        retention=seconds(request, "retention"),
        group=request.group or None,
        expires_in=seconds(request, "expires_in"),
        expires_at=when(request, "expires_at"),
        depends_on=[dependency(dep, i) for i, dep in enumerate(request.depends_on)],
        concurrency_key=request.concurrency_key or None,
        retry_policy=retry_spec(request),
    )


def dependency(dep: tpb.TaskDependency, i: int) -> Dependency:
    return Dependency(dep.task_id, enum_value(POLICIES, dep.on_failure, f"depends_on[{i}].on_failure"))


def retry_spec(request: pb.EnqueueRequest) -> RetrySpec | None:
    if not request.HasField("retry_policy"):
        return None
    policy = request.retry_policy
    return RetrySpec(
        kind=enum_value(STRATEGIES, policy.strategy, "retry_policy.strategy"),
        base=seconds(policy, "base"),
        cap=seconds(policy, "max"),
    )


def task_info(task: Any) -> pb.TaskInfo:
    return pb.TaskInfo(
        id=task.id,
        queue=task.queue,
        type=task.type,
        state=STATES[str(task.state)],
        priority=task.priority,
        retried=task.retried,
        max_retry=task.max_retry,
        last_error=task.seal_error or task.last_error or "",  # (why a sealed value reads empty here)
        enqueued_at=timestamp(task.enqueued_at),
        process_at=timestamp(task.due_at),
        completed_at=timestamp(task.finished_at),
        payload=bytes(task.payload or b""),
        content_type=task.content_type,
        started_at=timestamp(task.started_at),
        progress=task.progress or 0,
        progress_message=task.progress_message or "",
    )


def state_filter(number: int) -> str | None:
    if number == tpb.TASK_STATE_UNSPECIFIED:
        return None
    return enum_value(STATE_NAMES, number, "state")


# -- cron --------------------------------------------------------------------------------


def cron_spec(entry: pb.CronEntry) -> CronSpec:
    return CronSpec(
        id=entry.id,
        spec=entry.spec,
        task_type=entry.task_type,
        queue=entry.queue or "default",
        payload=entry.payload,
        content_type=entry.content_type or "application/json",
        options=cron_options(entry),
        paused=entry.paused,
    )


def cron_options(entry: pb.CronEntry) -> dict[str, Any]:
    options = entry.options
    for field, _ in options.ListFields():
        if field.name not in CRON_OPTIONS:
            raise InvalidArgument(f"options.{field.name}", "is not a cron task option (each fire decides it)")
    out = {
        "max_retry": options.max_retry or None,
        "timeout": seconds(options, "timeout"),
        "retention": seconds(options, "retention"),
        "unique_ttl": seconds(options, "unique_ttl"),
        "priority": options.priority or None,
        "group": options.group or None,
        "concurrency_key": options.concurrency_key or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def cron_entry(entry: Any) -> pb.CronEntry:
    options = entry.options or {}
    return pb.CronEntry(
        id=entry.id,
        spec=entry.spec,
        task_type=entry.task_type,
        queue=entry.queue,
        payload=bytes(entry.payload or b""),
        content_type=entry.content_type,
        options=tpb.TaskOptions(
            max_retry=options.get("max_retry") or 0,
            timeout=duration(options.get("timeout")),
            retention=duration(options.get("retention")),
            unique_ttl=duration(options.get("unique_ttl")),
            priority=options.get("priority") or 0,
            group=options.get("group") or "",
            concurrency_key=options.get("concurrency_key") or "",
        ),
        paused=entry.paused,
        next_run_at=timestamp(entry.next_run_at),
    )


# -- webhooks ------------------------------------------------------------------------------


def webhook_spec(worker: pb.WebhookWorker) -> WebhookSpec:
    return WebhookSpec(
        name=worker.name,
        url=worker.url,
        queues=dict(worker.queues),
        concurrency=worker.concurrency or 10,
        secrets=list(worker.secrets),
        batch_types=list(worker.batch_types),
        request_timeout=seconds(worker, "request_timeout"),
        paused=worker.paused,
    )


def webhook_worker(reg: Any) -> pb.WebhookWorker:
    """A registration with its secrets left out (they are write-only)."""
    return pb.WebhookWorker(
        name=reg.name,
        url=reg.url,
        queues=reg.queues or {},
        concurrency=reg.concurrency,
        batch_types=reg.batch_types or [],
        request_timeout=duration(reg.request_timeout),
        paused=reg.paused,
    )
