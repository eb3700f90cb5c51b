"""Settings for the processes the django.tasks tests start (``conveyor_worker``).

The project's own, plus the queues the test tasks use (QUEUES validation
is on, as in Django).
"""

from __future__ import annotations

from conveyor_site.settings import *  # noqa: F403

TASKS = {
    "default": {
        "BACKEND": "conveyor.django_tasks.ConveyorBackend",
        "QUEUES": ["default", "urgent", "ordered", "sealed"],
    }
}
