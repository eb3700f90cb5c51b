"""Lease-scoped outcomes: ack, fail, release, archive, extend, progress.

Every operation matches ``state = active AND lease_id = ?``; a stale or
wrong lease changes nothing and raises (or reports) *lease lost*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.backoff import RetryPolicy, backoff_delay
from conveyor.broker.attempts import record_attempts
from conveyor.broker.base import Context, Then, run_now
from conveyor.broker.validation import check_seconds, check_time, scrub_text
from conveyor.conf import conveyor_settings
from conveyor.exceptions import InvalidArgument, LeaseLost
from conveyor.models import Task
from conveyor.sealing import ServerText
from conveyor.states import State
from conveyor.store import KEY_UNKNOWN, OutcomeRow, Runner, Wanted

CANCELED_WHILE_RUNNING = "canceled while running"
MAX_ERROR_LENGTH = 4000
# An ack's item: (the leased task, its result) or (task, result, who ran it).
AckItem = tuple[Any, ...]


def clip_error(error: str, prefix: str = "") -> str:
    """A worker's error as stored (after *prefix*): at most MAX_ERROR_LENGTH, and storable.

    The outcome is never refused for its text: a NUL or a lone surrogate
    becomes U+FFFD, so a retry stays a retry and a skip-retry an archive. A
    ``ServerText`` stays one (it is stored unsealed, conveyor/sealing.py).
    """
    text = scrub_text(prefix + (error or ""))
    text = text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"
    return ServerText(text) if isinstance(error, ServerText) else text


def retry_policy_of(task: Task) -> RetryPolicy:
    return RetryPolicy(
        kind=task.retry_kind or conveyor_settings.RETRY_POLICY,
        base=task.retry_base if task.retry_base is not None else conveyor_settings.RETRY_BASE,
        cap=task.retry_cap if task.retry_cap is not None else conveyor_settings.RETRY_CAP,
    )


class Outcomes:
    """Outcomes of a lease (ack, fail, release, archive, extend, progress), matched on the lease."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # -- reading the lease ---------------------------------------------------

    def _leased_row(self, task_id: str, lease_id: str) -> Task:
        row = self.ctx.store.lock_leased(task_id, lease_id)
        if row is None:
            raise LeaseLost(task_id, lease_id)
        return row

    def _finish(self, row: Task, state: State, now: datetime, kind: str, fields: list[str]) -> None:
        """Save a terminal transition; resolve dependents after commit."""
        row.state, row.finished_at, row.updated_at, row.lease_expires_at = state, now, now, None
        self.ctx.store.finish(row, fields)
        if row.has_dependents:
            self.ctx.resolve_after_commit([row.id])
        if row.concurrency_key:
            self.ctx.wake_after_commit([row.queue])
        self.ctx.emit(kind, [row], now)

    # -- ack -----------------------------------------------------------------

    def ack(self, task_id: str, lease_id: str, result: bytes | None = None) -> Task:
        """Complete a leased task, storing an optional result (``ack_many`` of one)."""
        if self.ack_many([(LeaseRef(task_id, lease_id), result)]):
            raise LeaseLost(task_id, lease_id)
        return self.ctx.tasks.get(id=task_id)

    def ack_many(self, items: Sequence[AckItem]) -> list[str]:
        """Complete many leased tasks in one transaction; return the ids whose lease was lost.

        *items* are the leased rows as the caller holds them (their id and
        lease id are matched against the stored row) with an optional result,
        and optionally who ran it (a ``Runner``: its attempt names it).
        """
        if not items:
            return []
        now = self.ctx.now()
        won = self.ctx.store.complete_many(
            _wanted(items), now, conveyor_settings.COMPLETED_RETENTION, conveyor_settings.ATTEMPTS_KEPT, _runners(items)
        )
        return self._after_ack(items, won, now, self.ctx.after_commit)

    async def ack_on(self, conn: Any, items: Sequence[AckItem]) -> list[str]:
        """``ack_many`` through a psycopg ``AsyncConnection`` (autocommit, PostgreSQL), on the event loop.

        The same one statement, committed durably by itself; what follows a
        commit (dependents, wakes, events) is handed on at once.
        """
        if not items:
            return []
        now = self.ctx.now()
        won = await self.ctx.store.acomplete_many(  # type: ignore[attr-defined]
            conn,
            _wanted(items),
            now,
            conveyor_settings.COMPLETED_RETENTION,
            conveyor_settings.ATTEMPTS_KEPT,
            _runners(items),
        )
        return self._after_ack(items, won, now, run_now)

    def _after_ack(self, items: Sequence[AckItem], won: list[OutcomeRow], now: datetime, then: Then) -> list[str]:
        """Dependents, wakes and events of the completed rows (each scheduled by
        *then*); mark the caller's tasks; return the ids whose lease was lost."""
        won_ids = {r.id for r in won}
        for task, *_ in items:
            if task.id in won_ids:
                task.state, task.finished_at = State.COMPLETED, now
        self.ctx.resolve_after_commit([r.id for r in won if r.has_dependents], then=then)
        self.ctx.wake_after_commit({r.queue for r in won if r.concurrency_key}, then=then)
        self.ctx.emit("completed", won, now, then=then)
        return [task.id for task, *_ in items if task.id not in won_ids]

    # -- failure -------------------------------------------------------------

    def fail(self, task_id: str, lease_id: str, retry_at: datetime, error: str, by: Runner | None = None) -> Task:
        """Send a leased task back to ``retry``, due at *retry_at*."""
        check_time(retry_at, "retry_at")
        now = self.ctx.now()
        with self.ctx.atomic():
            row = self._leased_row(task_id, lease_id)
            record_attempts(self.ctx.store, [row], "failed" if row.cancel_requested else "retry", now, by, error)
            if row.cancel_requested:
                # An operator canceled the running attempt: it ends archived.
                row.last_error = _canceled_error(error)
                self._finish(row, State.ARCHIVED, now, "archived", ["last_error"])
            else:
                self._to_retry(row, retry_at, error, now)
        return row

    def _to_retry(self, row: Task, retry_at: datetime, error: str, now: datetime) -> None:
        row.state, row.due_at, row.updated_at = State.RETRY, retry_at, now
        row.retried += 1
        row.last_error = clip_error(error)
        row.lease_expires_at = None
        self.ctx.store.retry(row)
        self.ctx.wake_after_commit([row.queue], None if retry_at <= now else retry_at)
        self.ctx.emit("retried", [row], now)

    def archive_leased(self, task_id: str, lease_id: str, error: str = "", by: Runner | None = None) -> Task:
        """Dead-letter a leased task (skip retry)."""
        now = self.ctx.now()
        with self.ctx.atomic():
            row = self._leased_row(task_id, lease_id)
            record_attempts(self.ctx.store, [row], "failed", now, by, error)
            row.last_error = clip_error(error)
            self._finish(row, State.ARCHIVED, now, "archived", ["last_error"])
        return row

    def settle_failure(
        self,
        task_id: str,
        lease_id: str,
        error: str,
        *,
        skip_retry: bool = False,
        delay: float | None = None,
        by: Runner | None = None,
        traceback: str = "",
    ) -> Task:
        """Decide retry or archive for a failed attempt, and apply it.

        Archive when the task was canceled while running, when the worker
        asked to skip retries, when its retries are exhausted, or when its
        absolute deadline has passed (no later attempt could meet it);
        otherwise retry after the task's backoff (or after *delay* seconds).
        The attempt keeps *error* and the worker's *traceback* after it; the
        task's last_error, *error* alone.
        """
        if delay is not None:
            delay = check_seconds(delay, "delay", allow_zero=True)
        now = self.ctx.now()
        with self.ctx.atomic():
            row = self._leased_row(task_id, lease_id)
            self.settle_row(row, error, now, skip_retry=skip_retry, delay=delay, by=by, traceback=traceback)
        return row

    def settle_row(
        self,
        row: Task,
        error: str,
        now: datetime,
        *,
        skip_retry: bool = False,
        delay: float | None = None,
        fields: Sequence[str] = ("last_error",),
        by: Runner | None = None,
        outcome: str | None = None,
        traceback: str = "",
    ) -> None:
        """``settle_failure`` of a row locked by the caller; an archive writes
        *fields* too. Its attempt is recorded as *outcome* (default: ``retry``
        or ``failed``, as the row goes)."""
        goes_on = not (row.cancel_requested or skip_retry or row.retried >= row.max_retry) and not (
            row.deadline is not None and row.deadline <= now
        )
        told = f"{error}\n\n{traceback}" if traceback else error
        record_attempts(self.ctx.store, [row], outcome or ("retry" if goes_on else "failed"), now, by, told)
        if row.cancel_requested:
            row.last_error = _canceled_error(error)
        elif skip_retry:
            row.last_error = clip_error(error)
        elif row.retried >= row.max_retry:
            row.last_error = clip_error(error, "retries exhausted: ")
        elif row.deadline is not None and row.deadline <= now:
            row.last_error = clip_error(error, "deadline passed: ")
        else:
            wait = backoff_delay(retry_policy_of(row), row.retried) if delay is None else delay
            self._to_retry(row, now + timedelta(seconds=wait), error, now)
            return
        self._finish(row, State.ARCHIVED, now, "archived", list(fields))

    # -- release -------------------------------------------------------------

    def release(self, task_id: str, lease_id: str, by: Runner | None = None) -> Task:
        """Give a leased task back: ``pending``, due now, no retry spent."""
        lost = self.release_many([(task_id, lease_id)], by=by)
        if lost:
            raise LeaseLost(task_id, lease_id)
        return self.ctx.tasks.get(id=task_id)

    def release_many(self, refs: Sequence[tuple[str, str]], by: Runner | None = None) -> list[str]:
        """Release many leases; return the task ids whose lease was lost.

        *by*: the worker that held them, each of whose attempts ends
        ``released``; None: tasks never delivered (no attempt is recorded).
        """
        if not refs:
            return []
        now = self.ctx.now()
        with self.ctx.atomic():
            rows = self.ctx.store.lock_active(dict(refs))
            if by is not None:
                record_attempts(self.ctx.store, rows, "released", now, by)
            self.release_rows(rows, now)
        found = {r.id for r in rows}
        return [tid for tid, _ in refs if tid not in found]

    def release_rows(self, rows: Sequence[Task], now: datetime, *, in_place: bool = False) -> None:
        """``release_many`` of rows locked by the caller (one canceled while running is archived).

        *in_place*: each keeps its due time, and so its place in line
        (``store.requeue``: a dead node's tasks); otherwise it is due now.
        """
        back = [r for r in rows if not r.cancel_requested]
        if back:
            ids = [r.id for r in back]
            if in_place:
                self.ctx.store.requeue(ids, now)
            else:
                self.ctx.store.release(ids, now)
            for r in back:
                r.state, r.due_at = State.PENDING, (r.due_at if in_place else now)
            self.ctx.wake_after_commit({r.queue for r in back})
            self.ctx.emit("released", back, now)
        for r in rows:
            if r.cancel_requested:
                self.archive_canceled(r, now)

    def archive_canceled(self, row: Task, now: datetime, error: str = "") -> None:
        """End an attempt an operator canceled: archived, ``canceled while running``."""
        row.last_error = _canceled_error(error)
        self._finish(row, State.ARCHIVED, now, "archived", ["last_error"])

    # -- lease upkeep ----------------------------------------------------------

    def extend(self, task_id: str, lease_id: str) -> datetime:
        """Push the lease expiry to now + TTL; return the new expiry."""
        expires, lost = self.extend_many([(task_id, lease_id)])
        if lost:
            raise LeaseLost(task_id, lease_id)
        return expires

    def extend_many(self, refs: Sequence[tuple[str, str]]) -> tuple[datetime, list[str]]:
        """Extend many leases; return (new expiry, task ids whose lease was lost)."""
        expires = self.ctx.now() + timedelta(seconds=conveyor_settings.LEASE_TTL)
        if not refs:
            return expires, []
        alive = self.ctx.store.extend(dict(refs), expires)
        return expires, [tid for tid, _ in refs if tid not in alive]

    def set_progress(self, task_id: str, lease_id: str, percent: float, message: str = "") -> None:
        """Record progress (percent clamped to 0-100) of a leased task."""
        if isinstance(percent, bool) or not isinstance(percent, (int, float)) or percent != percent:
            raise InvalidArgument("percent", "must be a number")
        value = int(max(0, min(100, percent)))
        if not self.ctx.store.set_progress(task_id, lease_id, value, scrub_text(message or "")[:500]):
            raise LeaseLost(task_id, lease_id)


def _canceled_error(error: str) -> str:
    return clip_error(error, f"{CANCELED_WHILE_RUNNING}: ") if error else CANCELED_WHILE_RUNNING


@dataclass(slots=True)
class LeaseRef:
    """A task as an outcome names it (its id and lease id); ``ack_many`` marks it as it marks a task."""

    id: str
    lease_id: str
    state: str = State.ACTIVE
    finished_at: datetime | None = None
    key_id: str | None = KEY_UNKNOWN  # (the store reads the row's, for a result)


def _wanted(items: Sequence[AckItem]) -> Wanted:
    """id -> (lease id, result, key id); a task given twice keeps its first result.

    The key id is the row's as the task was leased (it cannot change under a
    lease: re-sealing passes over active rows), or ``KEY_UNKNOWN``.
    """
    wanted: Wanted = {}
    for task, result, *_ in items:
        wanted.setdefault(task.id, (task.lease_id, result, getattr(task, "key_id", KEY_UNKNOWN)))
    return wanted


def _runners(items: Sequence[AckItem]) -> dict[str, Runner]:
    """id -> who ran it, for the items that say (the store takes ``NOBODY`` for the rest)."""
    return {item[0].id: item[2] for item in items if len(item) > 2 and item[2] is not None}
