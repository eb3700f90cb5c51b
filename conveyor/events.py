"""Lifecycle events: what happened to a task, published after commit."""

from __future__ import annotations

from collections.abc import Sequence
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

    def as_dict(self, at: str | None = None) -> dict[str, Any]:
        """The event as JSON; *at*: its time as written already (``stamp(self.at)``)."""
        return {
            "kind": self.kind,
            "task_id": self.task_id,
            "queue": self.queue,
            "type": self.type,
            "state": self.state,
            "attempt": self.attempt,
            "last_error": self.last_error,
            "at": stamp(self.at) if at is None else at,
        }


def stamp(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def as_dicts(events: Sequence[Event]) -> list[dict[str, Any]]:
    """``as_dict`` of each event; the time object consecutive events share (a
    batch's ``now``) is written once. (Same object, not equal times: equal
    instants at other UTC offsets are written differently.)"""
    last: datetime | None = None
    written = ""
    out = []
    for event in events:
        if event.at is not last:
            last, written = event.at, stamp(event.at)
        out.append(event.as_dict(written))
    return out


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
