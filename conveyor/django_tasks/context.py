"""The context a ``takes_context`` task gets on Conveyor: Django's, plus progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.tasks import TaskContext


@dataclass(frozen=True, slots=True, kw_only=True)
class ConveyorTaskContext(TaskContext):
    """Django's ``TaskContext`` with a line to the worker that runs the task."""

    report: Callable[[float, str], None] = field(repr=False, compare=False)

    def progress(self, percent: float, message: str = "") -> None:
        """Report progress 0-100 (shown by the API and the dashboard); best effort."""
        self.report(percent, message)


def report_progress(context: TaskContext, percent: float, message: str = "") -> bool:
    """Report progress from a ``takes_context`` task under any backend.

    On Conveyor the percentage and message reach the task's row; Django's
    own backends have nowhere to put them, so there it does nothing. Returns
    whether the progress was reported.
    """
    if isinstance(context, ConveyorTaskContext):
        context.progress(percent, message)
        return True
    return False
