"""Transitions both stores write through the ORM (the same SQL on either database).

Each is one guarded write: it matches ``state = active`` and the row's own
lease id, so a stale or wrong lease changes nothing. The broker decides
which transition a row takes; these only write it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Case, Value, When

from conveyor.models import Task
from conveyor.states import State

# Columns every terminal transition writes, besides its own.
FINISHED = ["state", "finished_at", "updated_at", "lease_expires_at"]
RETRY = ["state", "due_at", "updated_at", "retried", "last_error", "lease_expires_at", "suspect"]


class OrmTransitions:
    alias: str

    @property
    def tasks(self) -> Any:
        return Task.objects.db_manager(self.alias)

    def lock_leased(self, task_id: str, lease_id: str) -> Task | None:
        """The active row under this lease, locked for the caller's transaction; None if the lease is lost."""
        return self.tasks.select_for_update().filter(id=task_id, state=State.ACTIVE, lease_id=lease_id).first()

    def lock_active(self, wanted: dict[str, str]) -> list[Task]:
        """The rows of *wanted* (id -> lease id) still active under their own lease, locked."""
        rows = self.tasks.select_for_update().filter(id__in=list(wanted), state=State.ACTIVE)
        return [r for r in rows if r.lease_id == wanted[r.id]]

    def finish(self, row: Task, fields: Sequence[str]) -> None:
        """Write a terminal transition the caller set on *row* (its *fields* and ``FINISHED``)."""
        row.save(update_fields=[*fields, *FINISHED])

    def retry(self, row: Task) -> None:
        """Write the retry the caller set on *row* (``RETRY``' columns): a failed
        attempt, or a crash's suspect sent back with its attempt not counted."""
        row.save(update_fields=RETRY)

    def release(self, ids: Sequence[str], now: datetime) -> None:
        """Give leased rows back: pending, due now. A released attempt did
        not count: it leaves no trace of a run."""
        self.tasks.filter(id__in=list(ids)).update(
            state=State.PENDING, due_at=now, updated_at=now, lease_expires_at=None, lease_holder="", started_at=None
        )

    def extend(self, wanted: dict[str, str], expires: datetime) -> set[str]:
        """Push the leases of *wanted* (id -> lease id) to *expires*; the ids still leased."""
        # Each task must match its own lease (CASE), not any lease of the call.
        own_lease = Case(*[When(id=tid, then=Value(lid)) for tid, lid in wanted.items()])
        scope = self.tasks.filter(id__in=list(wanted), state=State.ACTIVE)
        if scope.filter(lease_id=own_lease).update(lease_expires_at=expires) == len(wanted):
            return set(wanted)
        return {tid for tid, lid in scope.values_list("id", "lease_id") if wanted[tid] == lid}

    def set_progress(self, task_id: str, lease_id: str, percent: int, message: str) -> bool:
        """Record progress of a leased task; whether the lease still held."""
        scope = self.tasks.filter(id=task_id, lease_id=lease_id, state=State.ACTIVE)
        return bool(scope.update(progress=percent, progress_message=message))
