"""Lease: claim due tasks for a worker, honouring pause, policy and limits."""

from __future__ import annotations

import json
import random
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Count, Min

from conveyor.broker import pg
from conveyor.broker.base import BrokerBase, run_now
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
_ONE_STATEMENT: dict[tuple[str, str], tuple[str, list[Any]]] = {}
# How the lease's UPDATE finds the rows it picked. On connections with the
# server's settings, a join. On a node's own connections, which plan once
# per statement with sequential scans off (conveyor.dispatch.loop_lease),
# by primary key: there the join's generic plan can be a merge join that
# walks the whole primary key index up to the newest picked id.
_CLAIM = "FROM picked WHERE t.id = picked.id AND t.state IN ('pending', 'retry')"
_CLAIM_BY_KEY = "WHERE t.id = ANY(ARRAY(SELECT id FROM picked)) AND (t.state IN ('pending', 'retry')) IS TRUE"
_BY_KEY: dict[str, str] = {}  # plain statement -> its by-key form
_SENTINEL_LIMIT = 987654321
_NO_FLUSH_WAIT: dict[str, str] = {}


def without_flush_wait(sql: str) -> str:
    """The one-statement lease, committing without waiting for the WAL flush.

    ``set_config(..., true)`` inside the statement sets ``synchronous_commit``
    for the statement's own (autocommit) transaction only: nothing is left
    on the session, which behind a transaction-pooling PgBouncer may next
    serve someone else's enqueue. Only for statements that run on their own
    (``lease_on``); in a caller's transaction it would cover all of it.
    """
    out = _NO_FLUSH_WAIT.get(sql)
    if out is None:
        head, tail = "WITH ", "LEFT JOIN leased ON true"
        if not (sql.startswith(head) and sql.endswith(tail)):
            raise RuntimeError("unexpected lease statement shape")
        # First, so that operators see it in pg_stat_activity (which keeps
        # only the start of a long statement).
        nf = "WITH nf AS (SELECT set_config('synchronous_commit', 'off', true)), "
        out = _NO_FLUSH_WAIT[sql] = nf + sql[len(head) :] + " CROSS JOIN nf"
    return out


# The ordering policy last seen per (database, queue): the one-statement
# lease is compiled for a policy and checks it inside the statement.
_POLICY_SEEN: dict[tuple[str, str], str] = {}
_SENTINEL_TIME = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_SENTINEL_QUEUE = "conveyor-sentinel-queue-\u2063"
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


class LeaseOps(BrokerBase):
    def lease(self, queue: str, n: int, holder: str = "") -> LeaseBatch:
        """Claim up to *n* due tasks of *queue* under fresh leases."""
        if n <= 0:
            return LeaseBatch()
        now = self.now()
        if self.is_postgres and (self.db, queue) not in _LOCKED_PATH:
            batch = self._lease_one_statement(queue, n, holder, now)
            if batch is not None:
                self.emit("leased", batch.tasks, now)
                return batch
        with self.atomic():
            settings = self._lease_settings(queue)
            if self.is_postgres:
                # The settings in hand say which path the next lease takes.
                if _needs_locked_path(settings):
                    _LOCKED_PATH.add((self.db, queue))
                else:
                    _LOCKED_PATH.discard((self.db, queue))
            batch = self._lease_locked(queue, n, holder, settings, now)
        batch.tasks = [LeasedTask.from_model(t) for t in batch.tasks]
        self.emit("leased", batch.tasks, now)
        return batch

    def compile_lease_statements(self) -> None:
        """Compile the one-statement lease of every policy (needs a database thread)."""
        for policy in ORDERS:
            self._one_statement_sql(policy)

    async def lease_on(self, conn: Any, queue: str, n: int, holder: str = "") -> LeaseBatch | None:
        """``lease`` through a psycopg ``AsyncConnection`` (autocommit), on the event loop.

        PostgreSQL only, and only the one-statement case: None means the
        queue needs the locked path (``lease`` in a database thread), as it
        does before ``compile_lease_statements`` ran. Events are published
        at once: the statement committed on its own.
        """
        if n <= 0:
            return LeaseBatch()
        if (self.db, queue) in _LOCKED_PATH or any((self.db, p) not in _ONE_STATEMENT for p in ORDERS):
            return None
        now = self.now()
        for _ in range(2):
            sql, params, policy = self._one_statement_call(queue, n, holder, now, by_key=True)
            if conveyor_settings.LEASE_ASYNC_COMMIT:
                sql = without_flush_wait(sql)
            async with conn.cursor() as cursor:
                await cursor.execute(sql, params, prepare=conveyor_settings.PREPARED_STATEMENTS)
                rows = await cursor.fetchall()
            batch = self._one_statement_batch(queue, n, rows, policy)
            if batch is _AGAIN:
                continue
            if batch is not None:
                self.emit("leased", batch.tasks, now, then=run_now)
            return batch  # type: ignore[return-value]
        return None

    def _lease_one_statement(self, queue: str, n: int, holder: str, now: datetime) -> LeaseBatch | None:
        """PostgreSQL, a queue without rate or concurrency limits: one round trip.

        One statement reads the queue's settings, picks the rows with the
        ORM's ``select_for_update(skip_locked=True)`` query, claims them with
        an UPDATE and returns them together with the next retry due time,
        committing on its own (autocommit). The UPDATE only happens when the
        settings allow it: not paused, no rate or concurrency limit, and the
        ordering policy the pick was compiled for. Returns None when the
        queue has limits (the caller takes the locked path); a policy other
        than the one guessed is remembered and the statement runs again.
        Each lease id is the call's fresh ULID plus a digest of the task id:
        fresh per task, and per call.
        """
        for _ in range(2):
            sql, params, policy = self._one_statement_call(queue, n, holder, now)
            batch = self._one_statement_batch(queue, n, pg.run(self.db, sql, params), policy)
            if batch is not _AGAIN:
                return batch  # type: ignore[return-value]
        return None

    def _one_statement_call(
        self, queue: str, n: int, holder: str, now: datetime, *, by_key: bool = False
    ) -> tuple[str, list[Any], str]:
        """The statement, its parameters and the ordering policy it was compiled for;
        *by_key*: the form for a node's own connections (``_CLAIM_BY_KEY``)."""
        policy = _POLICY_SEEN.get((self.db, queue), "fifo")
        sql, slots = self._one_statement_sql(policy)
        if by_key:
            sql = _BY_KEY.get(sql) or _BY_KEY.setdefault(sql, sql.replace(_CLAIM, _CLAIM_BY_KEY, 1))
        values = {
            "now": now,
            "queue": queue,
            "lease": new_ulid(now) + ".",
            "expires": now + timedelta(seconds=conveyor_settings.LEASE_TTL),
            "holder": holder,
            "policy": policy,
            "n": n,
        }
        return sql, [values[slot] if isinstance(slot, str) else slot[0] for slot in slots], policy

    def _one_statement_batch(self, queue: str, n: int, rows: list[tuple[Any, ...]], policy: str) -> Any:
        """The batch the statement's rows describe; None for the locked path; _AGAIN
        when the queue's policy is not the one guessed (it is remembered)."""
        width = len(LEASED_COLUMNS)
        next_due, paused, rate, limit, actual = rows[0][width:]
        actual = actual or "fifo"
        if paused:
            return LeaseBatch(throttled="paused")
        if rate or limit or actual == "random":
            _LOCKED_PATH.add((self.db, queue))  # until a locked lease finds no limits
            return None
        if actual != policy:
            _POLICY_SEEN[(self.db, queue)] = actual
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

    def _one_statement_sql(self, policy: str) -> tuple[str, list[Any]]:
        """The lease statement for a policy, compiled once per database.

        Compiling the ORM query costs more than running it; it is compiled
        once with sentinel values, whose positions say where each call's
        values go (the rest of the parameters are constants). The LIMIT
        becomes a parameter too, so every batch size shares one statement.
        """
        key = (self.db, policy)
        cached = _ONE_STATEMENT.get(key)
        if cached is not None:
            return cached
        order, _index = ORDERS.get(policy, ORDERS["fifo"])
        pick = (
            self.tasks.due(_SENTINEL_TIME)
            .filter(queue=_SENTINEL_QUEUE)
            .order_by(*order)
            .select_for_update(skip_locked=True)
            .values("id")[:_SENTINEL_LIMIT]
        )
        # Django refuses to compile FOR UPDATE outside a transaction; an
        # atomic block that runs no statement sends nothing to the server.
        with self.atomic():
            pick_sql, pick_params = pick.query.get_compiler(using=self.db).as_sql()
        limit = f"LIMIT {_SENTINEL_LIMIT}"
        head, _, tail = pick_sql.partition(limit)
        if not tail or limit in tail or "%s" in tail:
            raise RuntimeError(f"unexpected lease query shape: {pick_sql}")
        pick_sql = f"{head}LIMIT %s{tail}"
        slots: list[Any] = ["queue"]
        slots += ["now" if p == _SENTINEL_TIME else "queue" if p == _SENTINEL_QUEUE else (p,) for p in pick_params]
        slots.append("n")
        qn = connections[self.db].ops.quote_name
        sql = (
            "WITH q AS (SELECT paused, rate, concurrency_limit, policy FROM conveyor_queue WHERE name = %s), "
            f"picked AS ({pick_sql}), "
            "leased AS (UPDATE conveyor_task AS t SET state = 'active', lease_id = %s || md5(t.id), "
            "lease_expires_at = %s, lease_holder = %s, started_at = %s, updated_at = %s, progress = 0, "
            f"progress_message = '' {_CLAIM} "
            "AND NOT EXISTS (SELECT 1 FROM q WHERE q.paused OR COALESCE(q.rate, 0) <> 0 "
            "OR COALESCE(q.concurrency_limit, 0) <> 0) "
            "AND COALESCE((SELECT q.policy FROM q), 'fifo') = %s "
            f"RETURNING {', '.join('t.' + qn(c) for c in LEASED_COLUMNS)}) "
            f"SELECT {', '.join('leased.' + qn(c) for c in LEASED_COLUMNS)}, m.next_due, "
            "q.paused, q.rate, q.concurrency_limit, q.policy "
            "FROM (SELECT (SELECT min(due_at) FROM conveyor_task WHERE queue = %s AND state = 'retry' "
            "AND due_at > %s) AS next_due) AS m LEFT JOIN q ON true LEFT JOIN leased ON true"
        )
        slots += ["lease", "expires", "holder", "now", "now", "policy", "queue", "now"]
        _ONE_STATEMENT[key] = (sql, slots)
        return sql, slots

    def _lease_settings(self, queue: str) -> Queue | None:
        rows = Queue.objects.using(self.db)
        settings = rows.filter(name=queue).first()
        if settings is not None and (settings.rate or settings.concurrency_limit) and self.is_postgres:
            # Limits are exact across nodes: leasers of a limited queue
            # serialize on its settings row, so the token bucket and the
            # per-key active counts they read are never stale.
            settings = rows.select_for_update().filter(name=queue).first()
        return settings

    def _claim(self, queue: str, n: int, now: datetime, policy: str, limit: int | None) -> tuple[list[Task], bool]:
        due = self.tasks.due(now).filter(queue=queue).defer(*NOT_FOR_DISPATCH)
        if limit is None:
            return select_due(due, n, policy), False
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
            rows = select_due(candidates, n - len(picked), policy)
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
            self.tasks.filter(queue=rows[0].queue, state__is=State.ACTIVE, concurrency_key__in=keys)
            .values_list("concurrency_key")
            .annotate(n=Count("id"))
        )
        active.update(dict.fromkeys(keys, 0))
        active.update(dict(counts))

    def _mark_leased(self, tasks: list[Task], now: datetime, holder: str, lease_id: Any) -> None:
        """Move claimed rows to active, each under its own fresh lease id.

        One UPDATE: with arrays on PostgreSQL, with a CASE over the ids on
        SQLite (written as SQL: building it from ORM ``When`` objects costs
        more than the statement).
        """
        expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        ids = {t.id: lease_id(now) for t in tasks}
        if self.is_postgres:
            pg.mark_leased(self.db, ids, expires, holder, now)
        else:
            self._mark_leased_sqlite(ids, expires, holder, now)
        for t in tasks:
            t.state, t.lease_id, t.lease_expires_at, t.lease_holder = State.ACTIVE, ids[t.id], expires, holder
            t.started_at = t.updated_at = now
            t.progress, t.progress_message = 0, ""

    def _mark_leased_sqlite(self, ids: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
        conn = connections[self.db]
        qn, adapt = conn.ops.quote_name, conn.ops.adapt_datetimefield_value
        whens = " ".join(["WHEN %s THEN %s"] * len(ids))
        sql = (
            f"UPDATE {qn(Task._meta.db_table)} SET {qn('state')} = %s, "
            f"{qn('lease_id')} = CASE {qn('id')} {whens} END, "
            f"{qn('lease_expires_at')} = %s, {qn('lease_holder')} = %s, {qn('started_at')} = %s, "
            f"{qn('updated_at')} = %s, {qn('progress')} = 0, {qn('progress_message')} = '' "
            f"WHERE {qn('id')} IN ({', '.join(['%s'] * len(ids))})"
        )
        params = [State.ACTIVE.value, *(v for pair in ids.items() for v in pair)]
        params += [adapt(expires), holder, adapt(now), adapt(now), *ids]
        with conn.cursor() as cursor:
            cursor.execute(sql, params)

    def _next_due(self, queue: str, now: datetime) -> datetime | None:
        # Pending tasks are due by construction; only a retry waits for its
        # backoff to pass.
        return self.tasks.filter(queue=queue, state__is=State.RETRY, due_at__gt=now).aggregate(m=Min("due_at"))["m"]

    # -- groups ----------------------------------------------------------------

    def lease_group(self, queue: str, group: str, holder: str = "") -> LeaseBatch:
        """Claim up to the group's max size members under one shared lease."""
        now = self.now()
        with self.atomic():
            settings = Queue.objects.using(self.db).filter(name=queue).first()
            if settings is not None and settings.paused:
                return LeaseBatch(throttled="paused")
            size = self.group_config(queue, group).max_size  # type: ignore[attr-defined]
            self._lock_group(queue, group)
            members = list(
                self.tasks.select_for_update(skip_locked=True)
                .filter(queue=queue, group=group, state__is=State.AGGREGATING)
                .exclude(expires_at__lte=now)
                .order_by("enqueued_at", "id")[:size]
            )
            if members:
                shared = new_ulid(now)
                self._mark_leased(members, now, holder, lambda _now: shared)
        leased = [LeasedTask.from_model(t) for t in members]
        self.emit("leased", leased, now)
        return LeaseBatch(tasks=leased)

    def _lock_group(self, queue: str, group: str) -> None:
        # Two leasers racing with SKIP LOCKED could each lock part of the
        # group as they scan; a transaction lock on the group makes one of
        # them take the whole group and the other find nothing.
        if self.is_postgres:
            key = zlib.crc32(f"{queue}\x00{group}".encode()) & 0x7FFFFFFF
            with connections[self.db].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [GROUP_LOCK_NAMESPACE, key])


def select_due(qs: Any, n: int, policy: str) -> list[Task]:
    """Lock and return up to *n* rows of *qs* in the queue's policy order.

    ``skip_locked``: rows another leaser holds are skipped, not waited for,
    so concurrent leasers on any node never claim (or block on) the same row.
    SQLite has no row locks; its IMMEDIATE transaction serializes leasers.
    """
    if policy == "random":
        return _select_random(qs, n)
    order, index = ORDERS.get(policy, ORDERS["fifo"])
    ordered = qs.order_by(*order)[:n]
    if connections[qs.db].vendor == "sqlite":
        return _select_sqlite(ordered, index)
    return list(ordered.select_for_update(skip_locked=True))


ORDERS = {
    # policy: (order, the partial index that serves it)
    "fifo": (("-priority", "due_at", "id"), "task_lease_fifo"),
    "lifo": (("-priority", "-due_at", "-id"), "task_lease_lifo"),
}


def _select_sqlite(ordered: Any, index: str) -> list[Task]:
    # SQLite's planner, seeing "due_at <= now", may prefer the (queue,
    # due_at) index and then sort every due row on each lease. Name the
    # partial index whose order is the policy's: a lease then reads about as
    # many rows as it claims. (The state filter is a literal, see lookups.)
    sql, params = ordered.query.sql_with_params()
    table = f'FROM "{Task._meta.db_table}"'
    if table not in sql:
        return list(ordered)
    sql = sql.replace(table, f'{table} INDEXED BY "{index}"', 1)
    return list(Task.objects.db_manager(ordered.db).raw(sql, params))


def _select_random(qs: Any, n: int) -> list[Task]:
    # Sample from a bounded window of the oldest due rows (an index scan),
    # instead of ORDER BY random() over the whole queue.
    window = list(qs.order_by("due_at", "id").values_list("id", flat=True)[: n * RANDOM_WINDOW])
    chosen = random.sample(window, min(len(window), n))
    rows = list(qs.select_for_update(skip_locked=True).filter(id__in=chosen))
    random.shuffle(rows)
    return rows


def leased_row(values: tuple[Any, ...]) -> LeasedTask:
    task = LeasedTask(*values)
    if isinstance(task.metadata, str):
        task.metadata = json.loads(task.metadata)
    if isinstance(task.payload, memoryview):
        task.payload = bytes(task.payload)
    return task


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
