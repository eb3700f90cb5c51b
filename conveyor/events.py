"""Lifecycle events: what happened to a task, published after commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

KINDS = (
    "enqueued",
    "scheduled",
    "leased",
    "completed",
    "retried",
    "archived",
    "canceled",
    "released",
    "promoted",
    "deleted",
)


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    task_id: str
    queue: str
    type: str
    state: str
    attempt: int
    at: datetime
    last_error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "task_id": self.task_id,
            "queue": self.queue,
            "type": self.type,
            "state": self.state,
            "attempt": self.attempt,
            "last_error": self.last_error,
            "at": self.at.isoformat().replace("+00:00", "Z"),
        }


def event_for(kind: str, task: Any, at: datetime) -> Event:
    """Build an event from a task row (or anything with the same attributes)."""
    return Event(
        kind=kind,
        task_id=task.id,
        queue=task.queue,
        type=task.type,
        state=task.state,
        attempt=task.retried + 1,
        at=at,
        last_error=task.last_error or "",
    )
