"""``ConveyorBackend``: Django's task backend interface over the broker."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
from django.tasks.exceptions import InvalidTaskBackend, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.json import normalize_json

from conveyor.broker import TaskSpec, get_broker
from conveyor.django_tasks.stored import (
    TYPE_PREFIX,
    Call,
    decode_call,
    decode_error,
    decode_result,
    encode_call,
    task_of,
)
from conveyor.exceptions import TaskNotFound
from conveyor.models import Task as TaskRow
from conveyor.states import State

DEFAULT_RETENTION = 86400.0  # a day: long enough to read a result back, short enough to stay small

STATUS = {
    State.SCHEDULED: TaskResultStatus.READY,
    State.PENDING: TaskResultStatus.READY,
    State.RETRY: TaskResultStatus.READY,
    State.AGGREGATING: TaskResultStatus.READY,
    State.BLOCKED: TaskResultStatus.READY,
    State.ACTIVE: TaskResultStatus.RUNNING,
    State.COMPLETED: TaskResultStatus.SUCCESSFUL,
    State.ARCHIVED: TaskResultStatus.FAILED,
    State.CANCELED: TaskResultStatus.FAILED,
}


def conveyor_priority(django_priority: int) -> int:
    """Django's -100..100 (default 0) onto Conveyor's 1..9 (default 4), monotonic.

    The default alone maps to 4, so any priority above it runs before
    default tasks and any below after them: 1..100 in five equal steps onto
    5..9, -1..-100 in three onto 3..1. Whole-number arithmetic, no rounding.
    """
    if django_priority > 0:
        return 5 + (django_priority - 1) * 5 // TASK_MAX_PRIORITY
    if django_priority < 0:
        return 3 - (-django_priority - 1) * 3 // -TASK_MIN_PRIORITY
    return 4


def option_problems(options: dict[str, Any]) -> list[str]:
    """What is wrong with a backend's OPTIONS (empty when nothing)."""
    problems = [f"unknown option {key!r} (known: MAX_RETRY, RETENTION)" for key in options if key not in KNOWN_OPTIONS]
    retention = options.get("RETENTION", DEFAULT_RETENTION)
    if isinstance(retention, bool) or not isinstance(retention, (int, float)) or not 0 <= retention < float("inf"):
        problems.append(f"RETENTION must be a number of seconds >= 0, not {retention!r}")
    max_retry = options.get("MAX_RETRY", 0)
    if isinstance(max_retry, bool) or not isinstance(max_retry, int) or max_retry < 0:
        problems.append(f"MAX_RETRY must be a whole number >= 0, not {max_retry!r}")
    return problems


KNOWN_OPTIONS = frozenset({"MAX_RETRY", "RETENTION"})


class ConveyorBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.problems = option_problems(self.options)

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        for problem in self.problems:
            yield checks.Error(f"TASKS[{self.alias!r}] OPTIONS: {problem}", id="conveyor.tasks.E001")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        if self.problems:
            raise InvalidTaskBackend(f"TASKS[{self.alias!r}] OPTIONS: {'; '.join(self.problems)}")
        self.validate_task(task)
        args, kwargs = normalize_json(args), normalize_json(kwargs)  # as Django's TaskResult does
        payload = encode_call(task, args, kwargs)
        stored = get_broker().enqueue(
            TaskSpec(
                type=TYPE_PREFIX + task.module_path,
                queue=task.queue_name,
                payload=payload,
                priority=conveyor_priority(task.priority),
                process_at=task.run_after,
                max_retry=self.options.get("MAX_RETRY", 0),
                retention=float(self.options.get("RETENTION", DEFAULT_RETENTION)),
            )
        )
        result = result_of(task, stored, decode_call(payload))
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            stored = get_broker().get_task(result_id)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        if not stored.type.startswith(TYPE_PREFIX):
            raise TaskResultDoesNotExist(result_id)
        call = decode_call(bytes(stored.payload))
        try:
            task = task_of(stored.type, call, stored.queue)
        except LookupError:
            raise TaskResultDoesNotExist(result_id) from None
        return result_of(task, stored, call)


def result_of(task: Task, row: TaskRow, call: Call) -> TaskResult:
    """The ``TaskResult`` of a stored task (*call*: its decoded payload)."""
    state = State(row.state)
    status = STATUS[state]
    value, succeeded_on = decode_result(row.result) if status == TaskResultStatus.SUCCESSFUL else (None, "")
    errors, failed_on = [], ""
    if row.last_error or status == TaskResultStatus.FAILED:
        # A task that succeeded after a failed attempt keeps that attempt's
        # error, as Django keeps the errors of every failed attempt.
        error, failed_on = decode_error(row.last_error, fallback=str(state))
        errors.append(error)
    result = TaskResult(
        task=task,
        id=row.id,
        status=status,
        enqueued_at=row.enqueued_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        last_attempted_at=row.started_at,
        args=call.args,
        kwargs=call.kwargs,
        backend=call.backend,
        errors=errors,
        worker_ids=worker_ids(row, state, succeeded_on, failed_on),
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", value)
    return result


def worker_ids(row: TaskRow, state: State, succeeded_on: str, failed_on: str) -> list[str]:
    """One entry per attempt, the running one included (as Django counts it).

    Conveyor keeps the worker of the last attempt and of the failure before
    it (from the result and the last error); other entries are "".
    """
    ran = state in (State.ACTIVE, State.COMPLETED) or (state == State.ARCHIVED and row.started_at is not None)
    ids = [""] * (row.retried + (1 if ran else 0))
    last = len(ids) - 1
    if state in (State.ACTIVE, State.COMPLETED):
        if ids:
            ids[last] = succeeded_on  # "" while it runs
        last -= 1
    if failed_on and last >= 0:
        ids[last] = failed_on
    return ids
