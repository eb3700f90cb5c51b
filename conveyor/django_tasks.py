"""Run Django's own tasks (``django.tasks``) on Conveyor.

    TASKS = {"default": {"BACKEND": "conveyor.django_tasks.ConveyorBackend",
                         "QUEUES": ["default", "emails"]}}

``my_task.enqueue(...)`` stores a Conveyor task through the broker inside
the caller's database transaction (it commits, or rolls back, with it; the
dispatchers are woken after the commit). Run the functions with
``manage.py conveyor_worker``. ``get_result`` reads the task back.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task, TaskError, TaskResult, TaskResultStatus
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils.module_loading import import_string

from conveyor.broker import TaskSpec, get_broker
from conveyor.exceptions import TaskNotFound
from conveyor.states import State

TYPE_PREFIX = "django:"

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
    """Django's -100..100 (default 0) onto Conveyor's 1..9 (default 4)."""
    return max(1, min(9, 4 + round(django_priority / 20)))


class ConveyorBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        payload = json.dumps({"args": list(args), "kwargs": dict(kwargs)}, separators=(",", ":")).encode()
        stored = get_broker().enqueue(
            TaskSpec(
                type=TYPE_PREFIX + task.module_path,
                queue=task.queue_name,
                payload=payload,
                priority=conveyor_priority(task.priority),
                process_at=task.run_after,
                max_retry=int(self.options.get("MAX_RETRY", 0)),
            )
        )
        return self._result(task, stored)

    def get_result(self, result_id: str) -> TaskResult:
        try:
            stored = get_broker().get_task(result_id)
        except TaskNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        if not stored.type.startswith(TYPE_PREFIX):
            raise TaskResultDoesNotExist(result_id)
        try:
            task = import_string(stored.type[len(TYPE_PREFIX) :])
        except ImportError:
            raise TaskResultDoesNotExist(result_id) from None
        return self._result(task, stored)

    def _result(self, task: Task, stored: Any) -> TaskResult:
        data = json.loads(bytes(stored.payload) or b"{}")
        status = STATUS[State(stored.state)]
        attempts = stored.retried + (1 if stored.started_at else 0)
        errors = []
        if stored.last_error and status != TaskResultStatus.SUCCESSFUL:
            errors.append(TaskError(exception_class_path="builtins.Exception", traceback=stored.last_error))
        result = TaskResult(
            task=task,
            id=stored.id,
            status=status,
            enqueued_at=stored.enqueued_at,
            started_at=stored.started_at,
            finished_at=stored.finished_at,
            last_attempted_at=stored.started_at,
            args=data.get("args", []),
            kwargs=data.get("kwargs", {}),
            backend=self.alias,
            errors=errors,
            worker_ids=[stored.lease_holder or "conveyor"] * attempts,
        )
        if status == TaskResultStatus.SUCCESSFUL and stored.result is not None:
            object.__setattr__(result, "_return_value", json.loads(bytes(stored.result)))
        return result


def run_django_task(
    task_type: str, payload: dict[str, Any], *, task_id: str, attempt: int, started_at: datetime
) -> Any:
    """Call the function behind a ``django:`` task (used by ``conveyor_worker``)."""
    from inspect import iscoroutinefunction

    from asgiref.sync import async_to_sync
    from django.tasks.base import TaskContext

    task: Task = import_string(task_type[len(TYPE_PREFIX) :])
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    if task.takes_context:
        running = TaskResult(
            task=task,
            id=task_id,
            status=TaskResultStatus.RUNNING,
            enqueued_at=None,
            started_at=started_at,
            finished_at=None,
            last_attempted_at=started_at,
            args=args,
            kwargs=kwargs,
            backend=task.backend,
            errors=[],
            worker_ids=["conveyor"] * attempt,
        )
        args = [TaskContext(task_result=running), *args]
    if iscoroutinefunction(task.func):
        return async_to_sync(task.func)(*args, **kwargs)
    return task.func(*args, **kwargs)
