"""Run the function behind a ``django:`` Conveyor task, as Django's ImmediateBackend runs it.

``task_started`` before the call and ``task_finished`` after it (for a
failure from inside the ``except``, so receivers see the exception), the
return value JSON-normalised (a value that is not JSON fails the task), a
failure reported with its exception class path and traceback.
"""

from __future__ import annotations

from traceback import format_exception
from typing import Any

from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from conveyor.django_tasks.context import ConveyorTaskContext
from conveyor.django_tasks.stored import class_path, decode_call, encode_error, encode_result, task_of
from conveyor.sdk import Fail
from conveyor.sdk import Task as Delivery


def run_task(delivery: Delivery) -> dict[str, Any]:
    """Run one delivered attempt; return the result to store, or raise ``Fail``.

    LookupError (before anything ran) when this project has no such function.
    """
    call = decode_call(delivery.raw_payload)
    task = task_of(delivery.type, call, delivery.queue)
    sender = type(task.get_backend())
    worker_id = delivery.session_id or ""
    result = running_result(delivery, task, call.args, call.kwargs, worker_id)
    task_started.send(sender, task_result=result)
    try:
        if task.takes_context:
            context = ConveyorTaskContext(task_result=result, report=delivery.progress)
            value = normalize_json(task.call(context, *result.args, **result.kwargs))
        else:
            value = normalize_json(task.call(*result.args, **result.kwargs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # everything the function raises fails it, as in Django
        error = TaskError(exception_class_path=class_path(type(exc)), traceback="".join(format_exception(exc)))
        finish(result, TaskResultStatus.FAILED, errors=[error])
        task_finished.send(sender, task_result=result)
        # The last attempt is archived as it is (not "retries exhausted: ..."),
        # so the stored error stays readable as Django's TaskError.
        last = delivery.attempt > delivery.max_retry
        raise Fail(encode_error(error, worker_id), skip_retry=last) from exc
    object.__setattr__(result, "_return_value", value)
    finish(result, TaskResultStatus.SUCCESSFUL)
    task_finished.send(sender, task_result=result)
    return encode_result(value, worker_id)


def running_result(delivery: Delivery, task: Task, args: Any, kwargs: Any, worker_id: str) -> TaskResult:
    now = timezone.now()
    return TaskResult(
        task=task,
        id=delivery.id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=delivery.enqueued_at,
        started_at=now,
        finished_at=None,
        last_attempted_at=now,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        # Earlier attempts' workers are not sent with a delivery.
        worker_ids=[""] * (delivery.attempt - 1) + [worker_id],
    )


def finish(result: TaskResult, status: TaskResultStatus, errors: list[TaskError] | None = None) -> None:
    # TaskResult is frozen; Django's own backends update it the same way.
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "status", status)
    result.errors.extend(errors or [])
