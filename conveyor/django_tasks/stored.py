"""How a ``django.tasks`` call lives in a Conveyor task: its type, payload, result and error.

The backend writes the payload and reads all of them back into a
``TaskResult``; ``conveyor_worker`` writes the result and the error.

* type: ``django:<module path of the function>``;
* payload: JSON ``{"args": [...], "kwargs": {...}}`` plus the task's
  ``priority``, ``run_after`` and ``backend`` alias when not the defaults
  (Conveyor's own priority has only nine steps, so Django's is kept here);
* result: JSON ``{"return_value": <value>, "worker_id": "<session>"}``;
* error: ``<exception class path> on worker <session>``, a newline, then the
  traceback as Python prints it (its end kept when it is too long).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, Task
from django.tasks.base import DEFAULT_TASK_PRIORITY, TaskError
from django.utils.module_loading import import_string

TYPE_PREFIX = "django:"

# The protocol keeps 4000 characters of an error; leave room for a prefix
# the server may add ("canceled while running: ").
ERROR_BUDGET = 3900
_ERROR = re.compile(
    r"(?:[a-z][a-z ]*: )?(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+) on worker (?P<worker>\S*)\n(?P<traceback>.*)",
    re.DOTALL,
)


class ConveyorFailure(Exception):
    """Stands for a failure Conveyor recorded outside the task's function.

    The worker was lost, the lease expired, the task was canceled or expired
    before it ran: ``TaskError.traceback`` holds Conveyor's reason.
    """


@dataclass(frozen=True)
class Call:
    """A task call as stored in the payload."""

    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_TASK_PRIORITY
    run_after: datetime | None = None
    backend: str = DEFAULT_TASK_BACKEND_ALIAS


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def encode_call(task: Task, args: list[Any], kwargs: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {"args": args, "kwargs": kwargs}
    if task.priority != DEFAULT_TASK_PRIORITY:
        body["priority"] = task.priority
    if task.run_after is not None:
        body["run_after"] = task.run_after.isoformat()
    if task.backend != DEFAULT_TASK_BACKEND_ALIAS:
        body["backend"] = task.backend
    return json.dumps(body, separators=(",", ":")).encode()


def decode_call(payload: bytes) -> Call:
    body = json.loads(payload or b"{}")
    run_after = body.get("run_after")
    return Call(
        args=body.get("args", []),
        kwargs=body.get("kwargs", {}),
        priority=body.get("priority", DEFAULT_TASK_PRIORITY),
        run_after=datetime.fromisoformat(run_after) if run_after else None,
        backend=body.get("backend", DEFAULT_TASK_BACKEND_ALIAS),
    )


def function_for(task_type: str) -> Task:
    """The ``@task`` behind a ``django:`` type; LookupError (saying why) when there is none."""
    if not task_type.startswith(TYPE_PREFIX):
        raise LookupError(f"{task_type!r} is not a django.tasks type")
    path = task_type[len(TYPE_PREFIX) :]
    try:
        found = import_string(path)
    except ImportError as exc:
        raise LookupError(f"cannot import {path}: {exc}") from None
    if not isinstance(found, Task):
        raise LookupError(f"{path} is not a django.tasks task")
    return found


def task_of(task_type: str, call: Call, queue: str) -> Task:
    """The task as it was enqueued (the function's defaults overridden by the call's)."""
    return function_for(task_type).using(
        priority=call.priority, queue_name=queue, run_after=call.run_after, backend=call.backend
    )


def encode_result(value: Any, worker_id: str) -> dict[str, Any]:
    return {"return_value": value, "worker_id": worker_id}


def decode_result(stored: bytes | None) -> tuple[Any, str]:
    """(return value, worker id) of a stored result."""
    if stored is None:
        return None, ""
    value = json.loads(bytes(stored))
    if isinstance(value, dict) and "return_value" in value:
        return value["return_value"], str(value.get("worker_id") or "")
    return value, ""  # completed by something other than conveyor_worker


def encode_error(error: TaskError, worker_id: str) -> str:
    header = f"{error.exception_class_path} on worker {worker_id}\n"
    traceback = error.traceback
    room = ERROR_BUDGET - len(header)
    if len(traceback) > room:
        # The end of a traceback says what was raised, and where: keep it.
        traceback = "…\n" + traceback[-(room - 2) :]
    return header + traceback


def decode_error(text: str, fallback: str) -> tuple[TaskError, str]:
    """(error, worker id) of a task's last error; *fallback* is the reason when it is empty."""
    match = _ERROR.fullmatch(text)
    if match is None:
        return TaskError(exception_class_path=class_path(ConveyorFailure), traceback=text or fallback), ""
    return TaskError(exception_class_path=match["path"], traceback=match["traceback"]), match["worker"]
