"""The PostgreSQL store: the hot path's statements as SQL, through psycopg's public API.

Statements come by name from queries.sql (conveyor/store/sql.py). The sync
methods run on Django's connection of the store's alias (same transaction
as the ORM's, Django's errors); the ``a``-prefixed twins run on a psycopg
``AsyncConnection`` of a node's own, in autocommit (conveyor/dispatch/
loop_lease.py), whose sessions plan with sequential scans off: there the
lease and the completion find their rows by primary key (the ``by_key``
fragments). Statements whose parameter types never vary run as server-side
prepared statements (psycopg's ``prepare=True``): Django binds parameters
on the client, so PostgreSQL would plan each afresh, and planning the
lease costs twice its execution. ``PREPARED_STATEMENTS = False`` turns this
off, e.g. behind a pooler that cannot carry prepared statements.
"""

from __future__ import annotations

import functools
import json
import operator
import threading
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connections, models

from conveyor.conf import conveyor_settings
from conveyor.models import Task
from conveyor.store import sql
from conveyor.store.base import (
    LEASED_FIELDS,
    NOBODY,
    OUTCOME_COLUMNS,
    Attempt,
    OutcomeRow,
    Runner,
    Wanted,
    cell,
    task_columns,
)
from conveyor.store.orm import OrmTransitions

# psycopg prepares a statement only when a connection allows it; Django's
# connections don't. Allow it, but never automatically: only the statements
# run here ask for it.
NEVER_AUTOMATICALLY = 2**31 - 1
# Up to this many rows an INSERT's VALUES list; above, a COPY (15 ms for
# 1,000 tasks, against far more for one placeholder per value).
FEW = 10
# The columns an offer decides in insert_one_taking_offer; the rest are the task's.
_FROM_THE_OFFER = {
    "state": "COALESCE((SELECT 'active'::varchar FROM o), %(state)s)",
    "lease_id": "(SELECT lease_id FROM o)",
    "lease_expires_at": "(SELECT %(lease_expires_at)s::timestamptz FROM o)",
    "lease_holder": "COALESCE((SELECT holder FROM o), %(lease_holder)s)",
    "started_at": "(SELECT %(started_at)s::timestamptz FROM o)",
}


def _placeholder(attname: str) -> str:
    return f"%({attname})s::jsonb" if attname == "metadata" else f"%({attname})s"


@functools.cache
def _columns() -> dict[str, str]:
    """The statements' generated parts: column lists and the INSERTs' values.

    Each of these functions builds its text once (the model's columns do not
    change while the process runs): building it took a one-task INSERT
    0.1 ms.
    """
    columns = task_columns()
    leased = [Task._meta.get_field(name).column for name in LEASED_FIELDS]
    return {
        "columns": ", ".join(f'"{column}"' for column, _ in columns),
        "values": ", ".join(_placeholder(attname) for _, attname in columns),
        "offer_values": ", ".join(_FROM_THE_OFFER.get(attname) or _placeholder(attname) for _, attname in columns),
        "leased_t": ", ".join(f't."{c}"' for c in leased),
        "leased_l": ", ".join(f'leased."{c}"' for c in leased),
        "outcome_t": ", ".join(f"t.{c}" for c in OUTCOME_COLUMNS),
        "outcome": ", ".join(OUTCOME_COLUMNS),
    }


@functools.cache
def lease_sql(policy: str, *, by_key: bool, async_commit: bool) -> str:
    """The one-statement lease for *policy*'s order (fifo or lifo)."""
    parts = _columns()
    return sql.statement(
        "lease",
        order=sql.fragment(f"order_{policy}"),
        claim=sql.fragment("claim_by_key" if by_key else "claim_join"),
        no_flush_wait=sql.fragment("no_flush_wait") if async_commit else "",
        no_flush_wait_join=sql.fragment("no_flush_wait_join") if async_commit else "",
        leased_t=parts["leased_t"],
        leased_l=parts["leased_l"],
    )


@functools.cache
def complete_sql(*, by_key: bool) -> str:
    return sql.statement(
        "complete_many",
        complete_match=sql.fragment("complete_match_by_key" if by_key else "complete_match_plain"),
        outcome_t=_columns()["outcome_t"],
        outcome=_columns()["outcome"],
    )


@functools.cache
def insert_sql(*, take_offer: bool) -> str:
    parts = _columns()
    if take_offer:
        return sql.statement("insert_one_taking_offer", columns=parts["columns"], offer_values=parts["offer_values"])
    return sql.statement("insert_one", columns=parts["columns"], values=parts["values"])


def complete_params(
    wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
) -> dict[str, Any]:
    # Ids sorted, so that two completions planned alike lock rows in one order.
    ids = sorted(wanted)
    runners = [by.get(i, NOBODY) for i in ids]
    return {
        "now": now,
        "retention": retention,
        "kept": max(0, kept),
        "ids": ids,
        "leases": [wanted[i][0] for i in ids],
        "results": [wanted[i][1] for i in ids],
        "sessions": [r.session for r in runners],
        "labels": [json.dumps(r.labels) for r in runners],
        "nodes": [r.node for r in runners],
    }


def attempt_params(attempts: Sequence[Attempt], now: datetime, kept: int) -> dict[str, Any]:
    return {
        "now": now,
        "kept": kept,
        "ids": [a.task_id for a in attempts],
        "started": [a.started_at for a in attempts],
        "outcomes": [a.outcome for a in attempts],
        "errors": [a.error for a in attempts],
        "sessions": [a.by.session for a in attempts],
        "labels": [json.dumps(a.by.labels) for a in attempts],
        "nodes": [a.by.node for a in attempts],
        "keys": [a.key_id for a in attempts],
    }


def outcome_rows(rows: Sequence[tuple[Any, ...]], now: datetime) -> list[OutcomeRow]:
    won = [OutcomeRow(*values) for values in rows]
    for row in won:
        row.state, row.finished_at = "completed", now
    return won


class _Cursors(threading.local):
    """Each thread's server-side binding cursor on its Django connection.

    Reused from statement to statement while the connection is the same: a
    cursor keeps the adapters it looked up for each parameter's type, which
    a new cursor per statement would look up again.
    """

    cursor: psycopg.Cursor[Any] | None = None

    def on(self, raw: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
        cursor = self.cursor
        if cursor is None or cursor.closed or cursor.connection is not raw:
            # A server-side binding cursor: Django's connections make
            # client-side binding ones, which cannot prepare.
            cursor = self.cursor = psycopg.Cursor(raw)
        return cursor


_cursors = _Cursors()

# Each of a node's own connections' one cursor, as ``_Cursors`` for Django's:
# a new cursor per statement looked up the dumper of every parameter again
# (callgrind: a one-task INSERT 368k -> 279k instructions with the cursor
# kept). A connection runs one statement at a time (the pool lends it to
# one caller), so its statements can share the cursor.
_async_cursors: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], psycopg.AsyncCursor[Any]] = (
    weakref.WeakKeyDictionary()
)


def _async_cursor(conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncCursor[Any]:
    cursor = _async_cursors.get(conn)
    if cursor is None or cursor.closed:
        cursor = _async_cursors[conn] = conn.cursor()
    return cursor


class PostgresStore(OrmTransitions):
    vendor = "postgresql"
    one_insert_in_autocommit = True
    has_offers = True
    has_liveness = True

    def __init__(self, alias: str) -> None:
        self.alias = alias

    # -- running statements ------------------------------------------------------

    def run(
        self, query: str, params: Sequence[Any] | dict[str, Any], *, fetch: bool = True, prepare: bool = True
    ) -> list[tuple[Any, ...]]:
        """Execute one statement on Django's connection, prepared if *prepare*
        (and ``PREPARED_STATEMENTS``); its rows if *fetch*.

        Errors are Django's (``wrap_database_errors`` also marks a broken
        connection for replacement). A prepared statement that fails outside
        a transaction closes the connection, so the next call starts a
        session with no prepared statement a schema change may have
        invalidated ("cached plan must not change result type").
        """
        connection = connections[self.alias]
        if not (prepare and conveyor_settings.PREPARED_STATEMENTS):
            with connection.cursor() as cursor:
                cursor.execute(query, params)
                return cursor.fetchall() if fetch else []
        connection.ensure_connection()
        raw = connection.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = NEVER_AUTOMATICALLY
        try:
            with connection.wrap_database_errors:
                cursor = _cursors.on(raw)
                cursor.execute(query, params, prepare=True)
                return cursor.fetchall() if fetch else []
        except Exception:
            if not connection.in_atomic_block:
                # Its psycopg connection first, so that a pool (Django's
                # ``pool`` option) cannot take it back with its statements.
                raw.close()
                connection.close()
            raise

    @staticmethod
    async def arun(conn: psycopg.AsyncConnection[Any], query: str, params: Any, *, fetch: bool = True) -> list[Any]:
        """``run`` on a node's own ``AsyncConnection`` (autocommit)."""
        cursor = _async_cursor(conn)
        await cursor.execute(query, params, prepare=conveyor_settings.PREPARED_STATEMENTS)
        return await cursor.fetchall() if fetch else []

    # -- search ----------------------------------------------------------------------

    def matching(self, rows: Any, payload: Sequence[tuple[tuple[str, ...], Any]], metadata: dict[str, str],
                 contains: str) -> Any:  # fmt: skip
        # Containment (@>) so that the GIN indexes of migration 0008 answer
        # it: payload conditions merge into one object (one index probe).
        # The predicates repeat the partial indexes' conditions, which the
        # planner must see to use them (docs/decisions.md, "Search").
        if payload:
            rows = rows.alias(payload_json=PayloadJson("payload")).filter(
                key_id__isnull=True, content_type=JSON, payload_json__contains=merged(payload)
            )
        if metadata:
            rows = rows.exclude(metadata={}).filter(metadata__contains=metadata)
        if contains:
            # No index: a scan, newest first, until the page is full.
            rows = rows.alias(payload_text=PayloadText("payload")).filter(
                key_id__isnull=True, payload_text__contains=contains
            )
        return rows

    # -- enqueue ---------------------------------------------------------------------

    def insert_tasks(self, tasks: Sequence[Task]) -> None:
        columns = task_columns()
        if len(tasks) == 1:  # the statement every one-task enqueue runs
            (task,) = tasks
            self.insert_one(
                {attname: cell(getattr(task, attname), attname) for _, attname in columns}, take_offer=False
            )
        elif len(tasks) <= FEW:
            params = [cell(getattr(t, attname), attname) for t in tasks for _, attname in columns]
            # Not prepared: a few rows of mixed optional fields would make a
            # statement per size and pattern of None.
            self.run(_values_sql(len(tasks)), params, fetch=False, prepare=False)
        else:
            self._copy(tasks)

    def _copy(self, tasks: Sequence[Task]) -> None:
        # COPY joins the caller's transaction like any statement; it checks
        # constraints as an INSERT does (a duplicate id still raises IntegrityError).
        connection = connections[self.alias]
        connection.ensure_connection()
        statement = f"COPY conveyor_task ({_columns()['columns']}) FROM STDIN"
        values, metadata, binary = _copy_row()
        with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(statement) as copy:
            for task in tasks:
                row = list(values(task))  # what ``cell`` makes of each value, done where it changes one
                row[metadata] = json.dumps(row[metadata]) if row[metadata] else "{}"
                for i in binary:
                    if isinstance(row[i], memoryview):
                        row[i] = bytes(row[i])
                copy.write_row(row)

    def insert_one(self, params: dict[str, Any], *, take_offer: bool) -> tuple[Any, ...] | None:
        rows = self.run(insert_sql(take_offer=take_offer), params, fetch=take_offer)
        return rows[0] if take_offer else None

    async def ainsert_one(
        self, conn: psycopg.AsyncConnection[Any], params: dict[str, Any], *, take_offer: bool
    ) -> tuple[Any, ...] | None:
        rows = await self.arun(conn, insert_sql(take_offer=take_offer), params, fetch=take_offer)
        return rows[0] if take_offer else None

    async def alease_of(self, conn: psycopg.AsyncConnection[Any], task_id: str) -> tuple[Any, ...] | None:
        rows = await self.arun(conn, sql.statement("lease_of"), {"id": task_id})
        return rows[0] if rows else None

    async def ataken(self, conn: psycopg.AsyncConnection[Any], lease_ids: list[str], holder: str) -> list[Any]:
        """The leased rows (``LEASED_FIELDS``) of a node's taken offers, by lease id."""
        query = sql.statement("taken", leased_t=_columns()["leased_t"])
        return await self.arun(conn, query, {"leases": lease_ids, "holder": holder})

    async def akey_ids(self, conn: psycopg.AsyncConnection[Any], task_ids: list[str]) -> dict[str, str | None]:
        return dict(await self.arun(conn, sql.statement("key_ids"), {"ids": task_ids}))

    # -- lease -------------------------------------------------------------------------

    def lease(self, params: dict[str, Any], policy: str) -> list[tuple[Any, ...]] | None:
        return self.run(lease_sql(policy, by_key=False, async_commit=False), params)

    async def alease(self, conn: psycopg.AsyncConnection[Any], params: dict[str, Any], policy: str) -> list[Any]:
        # Run on its own (autocommit), so it may commit without the flush.
        query = lease_sql(policy, by_key=True, async_commit=conveyor_settings.LEASE_ASYNC_COMMIT)
        return await self.arun(conn, query, params)

    def select_due(self, due: Any, n: int, order: Sequence[str], index: str) -> list[Task]:
        # skip_locked: rows another leaser holds are skipped, not waited for,
        # so concurrent leasers on any node never claim (or block on) one row.
        return list(due.order_by(*order)[:n].select_for_update(skip_locked=True))

    def mark_leased(self, leases: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
        ids = sorted(leases)
        params = {"expires": expires, "holder": holder, "now": now, "ids": ids, "leases": [leases[i] for i in ids]}
        self.run(sql.statement("mark_leased"), params, fetch=False, prepare=False)

    def lock_group(self, namespace: int, key: int) -> None:
        self.run(sql.statement("lock_group"), {"namespace": namespace, "key": key}, prepare=False)

    # -- outcomes ------------------------------------------------------------------------

    def complete_many(
        self, wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
    ) -> list[OutcomeRow]:
        # One statement (the UPDATE and the attempts it records), atomic by
        # itself: no explicit transaction.
        params = complete_params(wanted, now, retention, kept, by)
        return outcome_rows(self.run(complete_sql(by_key=False), params), now)

    async def acomplete_many(
        self,
        conn: psycopg.AsyncConnection[Any],
        wanted: Wanted,
        now: datetime,
        retention: float,
        kept: int,
        by: dict[str, Runner],
    ) -> list[OutcomeRow]:
        params = complete_params(wanted, now, retention, kept, by)
        return outcome_rows(await self.arun(conn, complete_sql(by_key=True), params), now)

    def record_attempts(self, attempts: Sequence[Attempt], now: datetime, kept: int) -> None:
        # One statement per call: the numbers, the trim and the INSERT.
        if kept > 0 and attempts:
            self.run(sql.statement("record_attempts"), attempt_params(attempts, now, kept), fetch=False)

    # -- node death (docs/architecture.md, "Node death") ---------------------------------

    @staticmethod
    async def ahold_liveness(conn: psycopg.AsyncConnection[Any], namespace: int, key: int) -> bool:
        """Hold the liveness lock (*namespace*, *key*) on *conn*, taking it if
        this session does not hold it yet; whether it holds it now."""
        params = {"namespace": namespace, "key": key}
        rows = await PostgresStore.arun(conn, sql.statement("hold_liveness"), params)
        return bool(rows[0][0])

    def dead_nodes(self, alive: str) -> list[str]:
        from conveyor.cluster import LIVENESS_NAMESPACE

        params = {"namespace": LIVENESS_NAMESPACE, "alive": alive}
        return [row[0] for row in self.run(sql.statement("dead_nodes"), params, prepare=False)]

    # -- sweeps ----------------------------------------------------------------------------

    def purge(self, now: datetime, cutoff: datetime, limit: int) -> int:
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            cursor.execute(sql.statement("purge"), {"now": now, "cutoff": cutoff, "limit": limit})
            return cursor.rowcount


_VALUES_SQL: dict[int, str] = {}


JSON = "application/json"


class PayloadJson(models.Func):
    """A plaintext payload as jsonb, NULL if it is not JSON (the function of migration 0008)."""

    function = "conveyor_payload_json"
    output_field = models.JSONField()


class PayloadText(models.Func):
    """A payload as text, NULL if it is not UTF-8 (migration 0008)."""

    function = "conveyor_payload_text"
    output_field = models.TextField()


def merged(pairs: Sequence[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    """(path, value) pairs as one object: ((a, b), 1), ((a, c), 2) -> {"a": {"b": 1, "c": 2}}."""
    whole: dict[str, Any] = {}
    for path, value in pairs:
        at = whole
        for key in path[:-1]:
            nxt = at.get(key)
            if not isinstance(nxt, dict):
                nxt = at[key] = {}
            at = nxt
        at[path[-1]] = value
    return whole


def _values_sql(rows: int) -> str:
    """A VALUES-list INSERT of *rows* tasks (generated: one placeholder per column and row)."""
    query = _VALUES_SQL.get(rows)
    if query is None:
        row = "(" + ", ".join("%s::jsonb" if attname == "metadata" else "%s" for _, attname in task_columns()) + ")"
        query = _VALUES_SQL[rows] = (
            f"INSERT INTO conveyor_task ({_columns()['columns']}) VALUES {', '.join([row] * rows)}"
        )
    return query


_COPY_ROW: list[tuple[Callable[[Task], tuple[Any, ...]], int, list[int]]] = []


def _copy_row() -> tuple[Callable[[Task], tuple[Any, ...]], int, list[int]]:
    """A task's values in ``task_columns()`` order (one C call), the position
    of its metadata, and those of its binary fields."""
    if not _COPY_ROW:
        attnames = [attname for _, attname in task_columns()]
        binary = [i for i, f in enumerate(Task._meta.concrete_fields) if isinstance(f, models.BinaryField)]
        _COPY_ROW.append((operator.attrgetter(*attnames), attnames.index("metadata"), binary))
    return _COPY_ROW[0]
