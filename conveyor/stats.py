"""Per-minute history of each queue (enqueued, completed, failed, backlog).

Not task state: bookkeeping for the dashboard's charts. Each node tallies
its lifecycle events in memory and adds them to the minute rows every few
seconds; the reaper's leader records each queue's backlog.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from conveyor.models import QueueMinute

KEEP = timedelta(days=1)
COLUMNS = {"enqueued": "enqueued", "completed": "completed", "retried": "failed", "archived": "failed"}


def minute_of(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


class Tally:
    """Counts of events per (queue, minute), since the last flush."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, datetime], dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, events: Sequence[Any]) -> None:
        for event in events:
            column = COLUMNS.get(event.kind)
            if column is not None:
                self.counts[(event.queue, minute_of(event.at))][column] += 1

    def take(self) -> dict[tuple[str, datetime], dict[str, int]]:
        counts, self.counts = self.counts, defaultdict(lambda: defaultdict(int))
        return {key: dict(value) for key, value in counts.items()}


def save_counts(counts: dict[tuple[str, datetime], dict[str, int]], using: str = "default") -> None:
    """Add *counts* to their minute rows (create the row if it is new)."""
    for (queue, minute), columns in counts.items():
        increments = {name: F(name) + n for name, n in columns.items()}
        _upsert(using, queue, minute, increments, columns)


def record_backlog(backlog: dict[str, int], now: datetime, using: str = "default") -> None:
    """Store each queue's due waiting tasks as this minute's backlog; prune old rows."""
    minute = minute_of(now)
    for queue, n in backlog.items():
        _upsert(using, queue, minute, {"backlog": n}, {"backlog": n})
    QueueMinute.objects.db_manager(using).filter(minute__lt=minute - KEEP).delete()


def _upsert(using: str, queue: str, minute: datetime, update: dict[str, Any], create: dict[str, Any]) -> None:
    """Update the (queue, minute) row, or create it; another node may create it first."""
    rows = QueueMinute.objects.db_manager(using)
    if rows.filter(queue=queue, minute=minute).update(**update):
        return
    try:
        with transaction.atomic(using=using):
            rows.create(queue=queue, minute=minute, **create)
    except IntegrityError:
        rows.filter(queue=queue, minute=minute).update(**update)


def history(now: datetime, minutes: int) -> list[dict[str, Any]]:
    rows = QueueMinute.objects.filter(minute__gte=minute_of(now) - timedelta(minutes=minutes - 1)).order_by(
        "minute", "queue"
    )
    return [
        {
            "minute": row.minute.isoformat().replace("+00:00", "Z"),
            "queue": row.queue,
            "enqueued": row.enqueued,
            "completed": row.completed,
            "failed": row.failed,
            "backlog": row.backlog if row.backlog is not None else 0,
        }
        for row in rows
    ]
