"""Run Django's own tasks (``django.tasks``) on Conveyor.

    TASKS = {"default": {"BACKEND": "conveyor.django_tasks.ConveyorBackend", "QUEUES": ["default", "emails"]}}

``my_task.enqueue(...)`` stores a Conveyor task through the broker inside
the caller's database transaction (it commits, or rolls back, with it; the
dispatchers are woken after the commit). ``manage.py conveyor_worker`` runs
the functions; ``get_result`` reads the task back. docs/django.md has the
whole mapping and the differences from Django's reference backends.
"""

from __future__ import annotations

from conveyor.django_tasks.backend import ConveyorBackend, conveyor_priority
from conveyor.django_tasks.context import ConveyorTaskContext, report_progress
from conveyor.django_tasks.stored import TYPE_PREFIX, ConveyorFailure

__all__ = [
    "TYPE_PREFIX",
    "ConveyorBackend",
    "ConveyorFailure",
    "ConveyorTaskContext",
    "conveyor_priority",
    "report_progress",
]
