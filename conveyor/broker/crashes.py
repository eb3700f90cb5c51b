"""Crash attribution: what a worker's lost connection charges to the tasks it held.

A worker process that dies takes every task it held with it, and nothing
says which one killed it. Charging each an attempt lets one task that kills
its worker dead-letter the tasks that happened to run beside it; charging
none lets it kill workers forever. So a crash is charged only to a task it
names:

* the *suspects* among the tasks in flight (tasks that were in flight in an
  earlier crash) are each charged an attempt: retry after their backoff, or
  archived when their retries are exhausted; the other tasks go back to
  ``pending``, nothing spent;
* with no suspect in flight, a lone task is charged the same way;
* with no suspect and several tasks, nobody is charged: each becomes a
  suspect and goes to ``retry`` after its backoff, ``retried`` unchanged.

A suspect is dispatched only to a worker that holds no other suspect
(``QueueDispatcher``), so the next crash it is part of names it. Every
crash after a task's first charges it, so a task that kills every worker it
meets reaches its ``max_retry`` like any failing task.

Tasks a worker held in its prefetch window but had not started (it said
which it started, or the node counted them started at delivery,
docs/protocol.md §6.6) took no part in the crash: they go back to
``pending``, nothing spent, and are not counted.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from conveyor.backoff import backoff_delay
from conveyor.broker.attempts import record_attempts
from conveyor.broker.base import Context
from conveyor.broker.outcomes import Outcomes, clip_error, retry_policy_of
from conveyor.models import Task
from conveyor.states import State
from conveyor.store import Runner

WORKER_LOST = "worker connection lost"
# A suspect that no worker could take at once (each held a suspect) is due
# again after a random wait in this range (seconds), no attempt spent.
DEFER_SECONDS = (0.2, 1.0)


@dataclass(slots=True)
class CrashReport:
    """Where a crash's tasks went (task ids)."""

    charged: list[str] = field(default_factory=list)  # an attempt counted: retry, or archived
    suspects: list[str] = field(default_factory=list)  # retry after backoff, attempt not counted
    released: list[str] = field(default_factory=list)  # pending, nothing spent
    lost: list[str] = field(default_factory=list)  # their lease was gone already


def charged_rows(rows: Sequence[Task], in_flight: int) -> list[Task]:
    """The rows a crash with *in_flight* tasks charges (empty: all become suspects)."""
    suspects = [r for r in rows if r.suspect]
    if suspects:
        return suspects
    return list(rows) if in_flight == 1 else []


class Crashes:
    """Crash attribution: settle the tasks a lost worker held."""

    def __init__(self, ctx: Context, outcomes: Outcomes) -> None:
        self.ctx = ctx
        self.outcomes = outcomes  # how a charged task, a released one and a canceled one end

    def settle_crash(
        self,
        refs: Sequence[tuple[str, str]],
        error: str = WORKER_LOST,
        idle: Sequence[tuple[str, str]] = (),
        by: Runner | None = None,
    ) -> CrashReport:
        """A worker's connection dropped with *refs* (task id, lease id) in flight: attribute it.

        *refs* are every task the worker had started, so that the count is
        the worker's even when some lease was lost meanwhile; *idle* are the
        tasks it held without starting them (its prefetch window): released,
        in the same transaction, never suspects. Each started task's attempt
        is recorded as ``crashed`` (*by*: the worker), whatever it is charged;
        the idle ones never started, and record none.
        """
        report = CrashReport()
        if not refs and not idle:
            return report
        now = self.ctx.now()
        with self.ctx.atomic():
            waiting = self.ctx.store.lock_active(dict(idle)) if idle else []
            self.outcomes.release_rows(waiting, now)
            report.released = [r.id for r in waiting]
            rows = self.ctx.store.lock_active(dict(refs)) if refs else []
            charged = charged_rows(rows, len(refs))
            record_attempts(self.ctx.store, [r for r in rows if r not in charged], "crashed", now, by, error)
            if charged:
                for row in charged:
                    row.suspect = True
                    self.outcomes.settle_row(
                        row, error, now, fields=("last_error", "suspect"), by=by, outcome="crashed"
                    )
                rest = [r for r in rows if r not in charged]
                self.outcomes.release_rows(rest, now)
                report.charged = [r.id for r in charged]
                report.released += [r.id for r in rest]
            elif rows:
                note = clip_error(f"{error} with {len(refs)} tasks in flight (attempt not counted)")
                back = [(r, now + timedelta(seconds=backoff_delay(retry_policy_of(r), r.retried))) for r in rows]
                self._back_as_suspects(back, note, now, "retried", canceled_error=error)
                report.suspects = [r.id for r in rows]
        found = {r.id for r in [*waiting, *rows]}
        report.lost = [tid for tid, _ in [*refs, *idle] if tid not in found]
        return report

    def defer_suspects(self, refs: Sequence[tuple[str, str]]) -> list[str]:
        """Give back leased suspects no worker could take: ``retry``, due again
        within ``DEFER_SECONDS``, nothing spent, error kept. Returns the ids
        whose lease was lost."""
        if not refs:
            return []
        now = self.ctx.now()
        with self.ctx.atomic():
            rows = self.ctx.store.lock_active(dict(refs))
            back = [(r, now + timedelta(seconds=random.uniform(*DEFER_SECONDS))) for r in rows]
            self._back_as_suspects(back, None, now, "released")
        found = {r.id for r in rows}
        return [tid for tid, _ in refs if tid not in found]

    def _back_as_suspects(
        self,
        back: Sequence[tuple[Task, datetime]],
        error: str | None,
        now: datetime,
        kind: str,
        canceled_error: str = "",
    ) -> None:
        """Locked active rows back to ``retry`` as suspects, each due at its
        time, ``retried`` unchanged, with *error* (None: the error they had);
        *kind* is the event. One canceled while running is archived instead."""
        moved: list[Task] = []
        due: dict[str, datetime] = {}  # queue -> earliest
        for row, at in back:
            if row.cancel_requested:
                self.outcomes.archive_canceled(row, now, canceled_error)
                continue
            row.state, row.due_at, row.updated_at, row.lease_expires_at = State.RETRY, at, now, None
            row.suspect = True
            if error is not None:
                row.last_error = error
            self.ctx.store.retry(row)
            moved.append(row)
            due[row.queue] = min(at, due.get(row.queue, at))
        for queue, at in due.items():
            self.ctx.wake_after_commit([queue], at)
        if moved:
            self.ctx.emit(kind, moved, now)
