"""Receivers of Django's task signals that append what they saw to ``$DJANGO_TASKS_SIGNAL_LOG``.

Imported by ``tests.django_tasks.tasks``, so every process that runs those
tasks (the test itself, ``conveyor_worker``) records into the same file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from django.tasks.signals import task_enqueued, task_finished, task_started

ENV = "DJANGO_TASKS_SIGNAL_LOG"


def _recorder(name: str) -> Any:
    def record(sender: type, task_result: Any, **kwargs: Any) -> None:
        path = os.environ.get(ENV)
        if not path:
            return
        line = {
            "signal": name,
            "sender": f"{sender.__module__}.{sender.__qualname__}",
            "id": task_result.id,
            "status": str(task_result.status),
            "pid": os.getpid(),
            "errors": [e.exception_class_path for e in task_result.errors],
            "worker_ids": list(task_result.worker_ids),
            "in_except": sys.exc_info()[0] is not None,
        }
        with open(path, "a") as log:
            log.write(json.dumps(line) + "\n")

    return record


for _name, _signal in (("enqueued", task_enqueued), ("started", task_started), ("finished", task_finished)):
    _signal.connect(_recorder(_name), weak=False, dispatch_uid=f"tests.django_tasks.signal_log.{_name}")


def read_all(path: Path) -> list[dict[str, Any]]:
    """Every signal recorded, in the order written."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read(path: Path, task_id: str) -> list[dict[str, Any]]:
    """The signals recorded for *task_id*, in order."""
    return [line for line in read_all(path) if line["id"] == task_id]
