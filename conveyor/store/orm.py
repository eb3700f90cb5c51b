"""Transitions both stores write through the ORM (the same SQL on either database).

Each is one guarded write: it matches ``state = active`` and the row's own
lease id, so a stale or wrong lease changes nothing. The broker decides
which transition a row takes; these only write it.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, Count, Max, Q, Value, When

from conveyor import sealing
from conveyor.models import CronEntry, Offer, Task, TaskAttempt
from conveyor.states import State
from conveyor.store.base import Attempt, Resealed

# Columns every terminal transition writes, besides its own.
FINISHED = ["state", "finished_at", "updated_at", "lease_expires_at"]
RETRY = ["state", "due_at", "updated_at", "retried", "last_error", "lease_expires_at", "suspect"]


def released(now: datetime) -> dict[str, Any]:
    """The columns a leased row gives back when it is released, its due time aside."""
    return {"state": State.PENDING, "updated_at": now, "lease_expires_at": None, "lease_holder": "", "started_at": None}


class OrmTransitions:
    alias: str

    @property
    def tasks(self) -> Any:
        return Task.objects.db_manager(self.alias)

    def withdraw_offers_of(self, holder: str) -> int:
        """Delete node *holder*'s open offers (a DELETE waits for the INSERT
        taking one to commit: that task is stored by then)."""
        return int(Offer.objects.using(self.alias).filter(holder=holder).delete()[0])

    def leases_held_by(self, holder: str) -> list[tuple[str, str]]:
        """(id, lease id) of the active rows leased to node *holder*."""
        rows = self.tasks.filter(state=State.ACTIVE, lease_holder=holder).order_by("id")
        return [(task_id, lease_id or "") for task_id, lease_id in rows.values_list("id", "lease_id")]

    def hand_over(self, task_id: str, lease_id: str, holder: str) -> bool:
        """Write *holder* as the holder of the row active under this lease."""
        rows = self.tasks.filter(id=task_id, state=State.ACTIVE, lease_id=lease_id)
        return bool(rows.update(lease_holder=holder))

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
        self.tasks.filter(id__in=list(ids)).update(due_at=now, **released(now))

    def requeue(self, ids: Sequence[str], now: datetime) -> None:
        """Give leased rows back where they stood in line: pending, their due
        time kept (it was past when they were leased), no attempt spent."""
        self.tasks.filter(id__in=list(ids)).update(**released(now))

    def extend(self, wanted: dict[str, str], expires: datetime) -> set[str]:
        """Push the leases of *wanted* (id -> lease id) to *expires*; the ids still leased."""
        # Each task must match its own lease (CASE), not any lease of the call.
        own_lease = Case(*[When(id=tid, then=Value(lid)) for tid, lid in wanted.items()])
        scope = self.tasks.filter(id__in=list(wanted), state=State.ACTIVE)
        if scope.filter(lease_id=own_lease).update(lease_expires_at=expires) == len(wanted):
            return set(wanted)
        return {tid for tid, lid in scope.values_list("id", "lease_id") if wanted[tid] == lid}

    def record_attempts(self, attempts: Sequence[Attempt], now: datetime, kept: int) -> None:
        """Record attempts in the caller's transaction: their numbers (one
        read), the rows (one INSERT), and the trim when a task passed *kept*."""
        if kept <= 0 or not attempts:
            return
        rows = TaskAttempt.objects.db_manager(self.alias)
        last = dict(
            rows.filter(task_id__in={a.task_id for a in attempts})
            .values_list("task_id")
            .annotate(n=Max("number"))
            .order_by()
        )
        made = []
        for a in attempts:
            last[a.task_id] = number = last.get(a.task_id, 0) + 1
            made.append(
                TaskAttempt(
                    task_id=a.task_id, number=number, started_at=a.started_at, finished_at=now,
                    worker_session=a.by.session, worker_labels=a.by.labels, node=a.by.node,
                    outcome=a.outcome, error=a.error, key_id=a.key_id,
                )
            )  # fmt: skip
        rows.bulk_create(made)
        old = [Q(task_id=task_id, number__lte=n - kept) for task_id, n in last.items() if n > kept]
        if old:
            rows.filter(functools.reduce(operator.or_, old)).delete()

    def set_progress(self, task_id: str, lease_id: str, percent: int, message: str) -> bool:
        """Record progress of a leased task; whether the lease still held."""
        scope = self.tasks.filter(id=task_id, lease_id=lease_id, state=State.ACTIVE)
        return bool(scope.update(progress=percent, progress_message=message))

    # -- keys ------------------------------------------------------------------------

    def key_ids(self, task_ids: Sequence[str]) -> dict[str, str | None]:
        return dict(self.tasks.filter(id__in=list(task_ids)).values_list("id", "key_id"))

    def key_counts(self) -> dict[str, dict[str | None, int]]:
        def count(rows: Any) -> dict[str | None, int]:
            return dict(rows.values_list("key_id").annotate(n=Count("id")).order_by())

        return {
            "tasks": count(self.tasks),
            "cron": count(CronEntry.objects.db_manager(self.alias)),
            "attempts": count(TaskAttempt.objects.db_manager(self.alias)),
        }

    def reseal_tasks(self, key_id: str, after: str, limit: int) -> Resealed:
        # Which rows come next, unlocked; then lock those not active, passing
        # over rows another transaction holds (SKIP LOCKED). An active row's
        # result will come sealed under its lease's key: it is left for a
        # later pass, so that key never changes under a running task.
        ahead = list(
            self.tasks.filter(id__gt=after).exclude(key_id=key_id).order_by("id").values_list("id", flat=True)[:limit]
        )
        if not ahead:
            return Resealed()
        done = Resealed(last_id=ahead[-1], unopened={})
        with transaction.atomic(using=self.alias):
            rows = list(
                self.tasks.select_for_update(skip_locked=True)
                .filter(id__in=ahead)
                .exclude(state=State.ACTIVE)
                .exclude(key_id=key_id)
                .only("id", "key_id", "payload", "result", "last_error")
            )
            fresh = []
            for row in rows:
                if row.seal_error:
                    done.unopened[row.key_id] = done.unopened.get(row.key_id, 0) + 1  # type: ignore[index]
                    continue
                row.key_id = key_id
                values = sealing.seal_task_values(
                    {"id": row.id, "key_id": key_id, "payload": row.payload, "result": row.result,
                     "last_error": row.last_error}
                )  # fmt: skip
                row.payload, row.result, row.last_error = values["payload"], values["result"], values["last_error"]
                fresh.append(row)
            if fresh:
                self.tasks.bulk_update(fresh, ["payload", "result", "last_error", "key_id"])
                self._reseal_attempts([row.id for row in fresh], key_id)
        done.resealed = len(fresh)
        done.skipped = len(ahead) - len(rows)
        return done

    def _reseal_attempts(self, task_ids: list[str], key_id: str) -> None:
        """The attempts of these (locked, just re-sealed) tasks follow them to *key_id*."""
        rows = TaskAttempt.objects.db_manager(self.alias)
        moved = []
        for attempt in (
            rows.filter(task_id__in=task_ids).exclude(key_id=key_id).only("id", "task_id", "key_id", "error")
        ):
            if attempt.seal_error:  # (opened as it was read, conveyor/models.py)
                continue  # its key is gone: left as it is (it reads empty, saying why)
            attempt.error = sealing.seal_text(key_id, attempt.error, sealing.ATTEMPT_ERROR, attempt.task_id)
            attempt.key_id = key_id
            moved.append(attempt)
        if moved:
            rows.bulk_update(moved, ["error", "key_id"])

    def reseal_cron(self, key_id: str) -> Resealed:
        done = Resealed(unopened={})
        entries = CronEntry.objects.db_manager(self.alias)
        with transaction.atomic(using=self.alias):
            for entry in entries.select_for_update().exclude(key_id=key_id).order_by("id"):
                if entry.seal_error:
                    done.unopened[entry.key_id] = done.unopened.get(entry.key_id, 0) + 1  # type: ignore[index]
                    continue
                entry.payload = sealing.seal(key_id, entry.payload, sealing.CRON_PAYLOAD, entry.id)
                entry.key_id = key_id
                entry.save(update_fields=["payload", "key_id"])
                done.resealed += 1
        return done
