"""Lease: claim due tasks for a worker, honouring pause, policy and limits."""

from __future__ import annotations

import random
import zlib
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min

from conveyor.broker.base import Context, run_now
from conveyor.broker.groups import Groups
from conveyor.broker.types import LEASED_FIELDS, LeaseBatch, LeasedTask
from conveyor.conf import conveyor_settings
from conveyor.ids import new_ulid
from conveyor.models import Queue, Task
from conveyor.states import State

GROUP_LOCK_NAMESPACE = 0x67727570  # "grup"
# Columns a leased task never needs while in flight (or that the lease sets):
# not reading them saves conversions on every leased row.
NOT_FOR_DISPATCH = (
    "result",
    "unique_until",
    "finished_at",
    "purge_at",
    "updated_at",
    "lease_expires_at",
    "started_at",
    "lease_holder",
    "progress_message",
)
# Float slack when turning accrued tokens into whole tasks.
TOKEN_EPSILON = 1e-9
RANDOM_WINDOW = 10
LEASED_COLUMNS = tuple(Task._meta.get_field(name).column for name in LEASED_FIELDS)
# The ordering policy last seen per (database, queue): the one-statement
# lease is written for a policy and checks it inside the statement.
_POLICY_SEEN: dict[tuple[str, str], str] = {}
_AGAIN = object()  # the one-statement lease guessed the queue's policy wrong
# Queues (per database) whose last lease found limits or the random policy:
# they go straight to the locked path, which reads the settings anyway and
# takes them off this set when the limits are gone.
_LOCKED_PATH: set[tuple[str, str]] = set()


def on_locked_path(db: str, queue: str) -> bool:
    """Whether the last lease of *queue* found rate or concurrency limits or the random policy."""
    return (db, queue) in _LOCKED_PATH


def _needs_locked_path(settings: Queue | None) -> bool:
    return settings is not None and bool(settings.rate or settings.concurrency_limit or settings.policy == "random")


class Leases:
    """Lease: claim due tasks for a worker, one task at a time or a group at once."""

    def __init__(self, ctx: Context, groups: Groups) -> None:
        self.ctx = ctx
        self.groups = groups  # a group's max size

    def lease(self, queue: str, n: int, holder: str = "") -> LeaseBatch:
        """Claim up to *n* due tasks of *queue* under fresh leases."""
        if n <= 0:
            return LeaseBatch()
        now = self.ctx.now()
        if (self.ctx.db, queue) not in _LOCKED_PATH:
            batch = self._lease_one_statement(queue, n, holder, now)
            if batch is not None:
                self.ctx.emit("leased", batch.tasks, now)
                return batch
        with self.ctx.atomic():
            settings = self._lease_settings(queue)
            # The settings in hand say which path the next lease takes.
            if _needs_locked_path(settings):
                _LOCKED_PATH.add((self.ctx.db, queue))
            else:
                _LOCKED_PATH.discard((self.ctx.db, queue))
            batch = self._lease_locked(queue, n, holder, settings, now)
        batch.tasks = [LeasedTask.from_model(t) for t in batch.tasks]
        self.ctx.emit("leased", batch.tasks, now)
        return batch

    async def lease_on(self, conn: Any, queue: str, n: int, holder: str = "") -> LeaseBatch | None:
        """``lease`` through a psycopg ``AsyncConnection`` (autocommit), on the event loop.

        Only the one-statement case: None means the queue needs the locked
        path (``lease`` in a database thread). Events are published at once:
        the statement committed on its own.
        """
        if n <= 0:
            return LeaseBatch()
        if (self.ctx.db, queue) in _LOCKED_PATH:
            return None
        now = self.ctx.now()
        for _ in range(2):
            params, policy = self.statement_params(queue, n, holder, now)
            batch = self._one_statement_batch(queue, n, await self.ctx.store.alease(conn, params, policy), policy)
            if batch is _AGAIN:
                continue
            if batch is not None:
                self.ctx.emit("leased", batch.tasks, now, then=run_now)
            return batch  # type: ignore[return-value]
        return None

    def _lease_one_statement(self, queue: str, n: int, holder: str, now: datetime) -> LeaseBatch | None:
        """A queue without rate or concurrency limits: one round trip, where
        the store has such a lease (``lease`` in conveyor/store/queries.sql).

        Returns None when the store has none or the queue has limits (the
        caller takes the locked path); a policy other than the one guessed
        is remembered and the statement runs again.
        """
        for _ in range(2):
            params, policy = self.statement_params(queue, n, holder, now)
            rows = self.ctx.store.lease(params, policy)
            if rows is None:
                return None
            batch = self._one_statement_batch(queue, n, rows, policy)
            if batch is not _AGAIN:
                return batch  # type: ignore[return-value]
        return None

    def statement_params(self, queue: str, n: int, holder: str, now: datetime) -> tuple[dict[str, Any], str]:
        """The lease statement's parameters, and the ordering policy to write it for."""
        policy = _POLICY_SEEN.get((self.ctx.db, queue), "fifo")
        params = {
            "now": now,
            "queue": queue,
            "lease": new_ulid(now) + ".",
            "expires": now + timedelta(seconds=conveyor_settings.LEASE_TTL),
            "holder": holder,
            "policy": policy,
            "n": n,
        }
        return params, policy

    def _one_statement_batch(self, queue: str, n: int, rows: list[tuple[Any, ...]], policy: str) -> Any:
        """The batch the statement's rows describe; None for the locked path; _AGAIN
        when the queue's policy is not the one guessed (it is remembered)."""
        width = len(LEASED_COLUMNS)
        next_due, paused, rate, limit, actual = rows[0][width:]
        actual = actual or "fifo"
        if paused:
            return LeaseBatch(throttled="paused")
        if rate or limit or actual == "random":
            _LOCKED_PATH.add((self.ctx.db, queue))  # until a locked lease finds no limits
            return None
        if actual != policy:
            _POLICY_SEEN[(self.ctx.db, queue)] = actual
            return _AGAIN
        order, _index = ORDERS[policy]
        tasks = sorted((leased_row(row[:width]) for row in rows if row[0] is not None), key=sort_key(order))
        batch = LeaseBatch(tasks=tasks)
        if len(tasks) < n:
            batch.next_due_at = next_due
        return batch

    def _lease_locked(self, queue: str, n: int, holder: str, settings: Queue | None, now: datetime) -> LeaseBatch:
        if settings is not None and settings.paused:
            return LeaseBatch(throttled="paused")
        want, tokens = n, None
        if settings is not None and settings.rate:
            tokens = refill_tokens(settings, now)
            want = min(n, int(tokens + TOKEN_EPSILON))
            if want <= 0:
                return LeaseBatch(throttled="rate", retry_after=(1.0 - tokens) / settings.rate)
        policy = settings.policy if settings is not None else "fifo"
        limit = settings.concurrency_limit if settings is not None else None
        tasks, held = self._claim(queue, want, now, policy, limit)
        if tasks:
            self._mark_leased(tasks, now, holder, new_ulid)
        batch = LeaseBatch(tasks=tasks)
        if tokens is not None and settings is not None:
            settings.tokens, settings.tokens_at = tokens - len(tasks), now
            settings.save(update_fields=["tokens", "tokens_at"])
            if want < n and len(tasks) == want:
                batch.throttled = "rate"
                batch.retry_after = max(0.0, 1.0 - settings.tokens) / settings.rate
        if held:
            batch.throttled = "concurrency"
        elif len(tasks) < want:
            batch.next_due_at = self._next_due(queue, now)
        return batch

    def _lease_settings(self, queue: str) -> Queue | None:
        rows = Queue.objects.using(self.ctx.db)
        settings = rows.filter(name=queue).first()
        if settings is not None and (settings.rate or settings.concurrency_limit):
            # Limits are exact across nodes: leasers of a limited queue
            # serialize on its settings row, so the token bucket and the
            # per-key active counts they read are never stale. (SQLite has
            # no row locks: its write transaction serializes them already.)
            settings = rows.select_for_update().filter(name=queue).first()
        return settings

    def _claim(self, queue: str, n: int, now: datetime, policy: str, limit: int | None) -> tuple[list[Task], bool]:
        due = self.ctx.tasks.due(now).filter(queue=queue).defer(*NOT_FOR_DISPATCH)
        if limit is None:
            return self._select_due(due, n, policy), False
        return self._claim_limited(due, n, policy, limit)

    def _claim_limited(self, due: Any, n: int, policy: str, limit: int) -> tuple[list[Task], bool]:
        """Claim in priority order, skipping tasks whose key is at its limit.

        Each pass excludes saturated keys, so every row a pass returns is
        either claimed or saturates its key: the loop ends after at most one
        pass per saturated key. Skipped rows stay pending, untouched.
        """
        picked: list[Task] = []
        saturated: set[str] = set()
        active: dict[str, int] = {}
        held = False
        while len(picked) < n:
            candidates = due.exclude(id__in=[t.id for t in picked])
            if saturated:
                candidates = candidates.exclude(concurrency_key__in=saturated)
            rows = self._select_due(candidates, n - len(picked), policy)
            if not rows:
                break
            self._count_active(rows, active)
            for row in rows:
                key = row.concurrency_key
                if key is None:
                    picked.append(row)
                elif active[key] < limit:
                    picked.append(row)
                    active[key] += 1
                    if active[key] >= limit:
                        saturated.add(key)
                else:
                    saturated.add(key)
                    held = True
        return picked, held

    def _count_active(self, rows: list[Task], active: dict[str, int]) -> None:
        keys = {r.concurrency_key for r in rows if r.concurrency_key and r.concurrency_key not in active}
        if not keys:
            return
        counts = (
            self.ctx.tasks.filter(queue=rows[0].queue, state__is=State.ACTIVE, concurrency_key__in=keys)
            .values_list("concurrency_key")
            .annotate(n=Count("id"))
        )
        active.update(dict.fromkeys(keys, 0))
        active.update(dict(counts))

    def _mark_leased(self, tasks: list[Task], now: datetime, holder: str, lease_id: Any) -> None:
        """Move claimed rows to active, each under its own fresh lease id (one UPDATE)."""
        expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        ids = {t.id: lease_id(now) for t in tasks}
        self.ctx.store.mark_leased(ids, expires, holder, now)
        for t in tasks:
            t.state, t.lease_id, t.lease_expires_at, t.lease_holder = State.ACTIVE, ids[t.id], expires, holder
            t.started_at = t.updated_at = now
            t.progress, t.progress_message = 0, ""

    def _select_due(self, qs: Any, n: int, policy: str) -> list[Task]:
        """Lock and return up to *n* rows of *qs* in the queue's policy order."""
        if policy == "random":
            return _select_random(qs, n)
        order, index = ORDERS.get(policy, ORDERS["fifo"])
        return self.ctx.store.select_due(qs, n, order, index)

    def _next_due(self, queue: str, now: datetime) -> datetime | None:
        # Pending tasks are due by construction; only a retry waits for its
        # backoff to pass.
        return self.ctx.tasks.filter(queue=queue, state__is=State.RETRY, due_at__gt=now).aggregate(m=Min("due_at"))["m"]

    # -- groups ----------------------------------------------------------------

    def lease_group(self, queue: str, group: str, holder: str = "") -> LeaseBatch:
        """Claim up to the group's max size members under one shared lease."""
        now = self.ctx.now()
        with self.ctx.atomic():
            settings = Queue.objects.using(self.ctx.db).filter(name=queue).first()
            if settings is not None and settings.paused:
                return LeaseBatch(throttled="paused")
            size = self.groups.group_config(queue, group).max_size
            self._lock_group(queue, group)
            members = list(
                self.ctx.tasks.select_for_update(skip_locked=True)
                .filter(queue=queue, group=group, state__is=State.AGGREGATING)
                .exclude(expires_at__lte=now)
                .order_by("enqueued_at", "id")[:size]
            )
            if members:
                shared = new_ulid(now)
                self._mark_leased(members, now, holder, lambda _now: shared)
        leased = [LeasedTask.from_model(t) for t in members]
        self.ctx.emit("leased", leased, now)
        return LeaseBatch(tasks=leased)

    def _lock_group(self, queue: str, group: str) -> None:
        # Two leasers racing with SKIP LOCKED could each lock part of the
        # group as they scan; a lock on the group for the transaction makes
        # one of them take the whole group and the other find nothing.
        self.ctx.store.lock_group(GROUP_LOCK_NAMESPACE, zlib.crc32(f"{queue}\x00{group}".encode()) & 0x7FFFFFFF)


ORDERS = {
    # policy: (order, the partial index that serves it)
    "fifo": (("-priority", "due_at", "id"), "task_lease_fifo"),
    "lifo": (("-priority", "-due_at", "-id"), "task_lease_lifo"),
}


def _select_random(qs: Any, n: int) -> list[Task]:
    # SKIP LOCKED where the database has row locks (on SQLite the write
    # transaction serializes leasers). Sample from a bounded window of the oldest due rows (an index scan),
    # instead of ORDER BY random() over the whole queue.
    window = list(qs.order_by("due_at", "id").values_list("id", flat=True)[: n * RANDOM_WINDOW])
    chosen = random.sample(window, min(len(window), n))
    rows = list(qs.select_for_update(skip_locked=True).filter(id__in=chosen))
    random.shuffle(rows)
    return rows


def leased_row(values: tuple[Any, ...]) -> LeasedTask:
    return LeasedTask.from_row(values)


def sort_key(order: tuple[str, ...]) -> Any:
    """Python sort key of a policy's ORDER BY (RETURNING rows come unordered)."""
    descending = order[0].startswith("-") and order[1].startswith("-")

    def key(task: Task) -> tuple[Any, ...]:
        return (-task.priority, task.due_at, task.id)

    return (lambda t: (-t.priority, _neg_time(t.due_at), _Reverse(t.id))) if descending else key


class _Reverse:
    """Invert the order of a string inside a sort key."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: _Reverse) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.value == other.value


def _neg_time(when: datetime) -> float:
    return -when.timestamp()


def refill_tokens(settings: Queue, now: datetime) -> float:
    """Tokens in the queue's bucket at *now* (not yet saved)."""
    burst = float(settings.burst or 1)
    if settings.tokens_at is None:
        return burst
    elapsed = max(0.0, (now - settings.tokens_at).total_seconds())
    return min(burst, settings.tokens + (settings.rate or 0.0) * elapsed)
