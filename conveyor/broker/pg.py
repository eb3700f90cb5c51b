"""Statements of the hot path, below the ORM (PostgreSQL COPY and arrays; a cached SQLite insert).

The ORM renders a batch as one placeholder per value: a 1,000-task insert
is 30,000 placeholders that the driver splits and binds one by one, and a
100-task ack is an ``IN`` list PostgreSQL plans afresh each time. Here a
large insert is a ``COPY`` (15 ms for 1,000 tasks, against 33 ms for one
array per column through ``unnest`` and far more for placeholders), and an
ack of any size takes one array per column, so their cost no longer grows
with the number of placeholders. SQLite keeps the ORM forms; the conformance
suite runs every rule against both.

They run as server-side prepared statements (``run``): Django binds
parameters on the client, so PostgreSQL would parse and plan every
statement afresh, and planning the one-statement lease costs twice its
execution (0.87 ms -> 0.32 ms a lease of one task, commit included).
``PREPARED_STATEMENTS = False`` turns this off, e.g. behind a pooler that
cannot carry prepared statements.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connections, models

from conveyor.conf import conveyor_settings
from conveyor.models import Task

# psycopg prepares a statement only when a connection allows it; Django's
# connections don't. Allow it, but never automatically: only the statements
# run here ask for it.
NEVER_AUTOMATICALLY = 2**31 - 1


def run(
    using: str, sql: str, params: Sequence[Any], *, fetch: bool = True, prepare: bool = True
) -> list[tuple[Any, ...]]:
    """Execute one hot-path statement on PostgreSQL, as a prepared statement if *prepare*.

    Same connection and transaction as the ORM's; errors are Django's
    (``wrap_database_errors`` also marks a broken connection for
    replacement). Only statements whose parameter types never vary should
    be prepared: psycopg keys a prepared statement by the types too (None,
    bytes, a small or a large int each make another one). A statement that
    fails outside a transaction closes the connection, so the next call
    starts a session with no prepared statement a schema change may have
    invalidated ("cached plan must not change result type").
    """
    connection = connections[using]
    if not (prepare and conveyor_settings.PREPARED_STATEMENTS):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if fetch else []
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = NEVER_AUTOMATICALLY
    try:
        with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
            cursor.execute(sql, params, prepare=True)
            return cursor.fetchall() if fetch else []
    except Exception:
        if not connection.in_atomic_block:
            _discard(connection)
        raise


_COLUMNS: list[tuple[str, str]] | None = None  # (column, attname)


def task_columns() -> list[tuple[str, str]]:
    global _COLUMNS
    if _COLUMNS is None:
        _COLUMNS = [(f.column, f.attname) for f in Task._meta.concrete_fields]
    return _COLUMNS


def cell(value: Any, attname: str) -> Any:
    if attname == "metadata":
        return json.dumps(value or {})
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def insert_tasks(using: str, tasks: Sequence[Task]) -> None:
    """INSERT the tasks: a prepared VALUES list or a COPY on PostgreSQL, a cached statement on SQLite."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        _insert_sqlite(connection, tasks)
        return
    if len(tasks) <= FEW:
        _insert_values(using, connection, tasks)
        return
    columns = task_columns()
    qn = connection.ops.quote_name
    names = ", ".join(qn(column) for column, _ in columns)
    # COPY joins the caller's transaction like any statement; it checks
    # constraints as an INSERT does (a duplicate id still raises IntegrityError).
    connection.ensure_connection()
    statement = f"COPY {qn(Task._meta.db_table)} ({names}) FROM STDIN"
    values, metadata, binary = _copy_row()
    with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(statement) as copy:
        for task in tasks:
            row = list(values(task))  # what ``cell`` makes of each value, done where it changes one
            row[metadata] = json.dumps(row[metadata]) if row[metadata] else "{}"
            for i in binary:
                if isinstance(row[i], memoryview):
                    row[i] = bytes(row[i])
            copy.write_row(row)


_COPY_ROW: tuple[Callable[[Task], tuple[Any, ...]], int, list[int]] | None = None


def _copy_row() -> tuple[Callable[[Task], tuple[Any, ...]], int, list[int]]:
    """A task's values in ``task_columns()`` order (one C call), the position
    of its metadata, and those of its binary fields."""
    global _COPY_ROW
    if _COPY_ROW is None:
        attnames = [attname for _, attname in task_columns()]
        binary = [i for i, f in enumerate(Task._meta.concrete_fields) if isinstance(f, models.BinaryField)]
        _COPY_ROW = (operator.attrgetter(*attnames), attnames.index("metadata"), binary)
    return _COPY_ROW


# Up to this many rows a plain VALUES list; above, a COPY.
FEW = 10
_VALUES_SQL: dict[int, str] = {}


def insert_statement(tasks: Sequence[Task]) -> tuple[str, list[Any]]:
    """A VALUES-list INSERT of the tasks (PostgreSQL) and its parameters."""
    columns = task_columns()
    return values_sql(len(tasks)), [cell(getattr(t, attname), attname) for t in tasks for _, attname in columns]


def values_sql(rows: int) -> str:
    """``insert_statement``'s SQL for that many rows."""
    sql = _VALUES_SQL.get(rows)
    if sql is None:
        columns = task_columns()
        row = "(" + ", ".join("%s::jsonb" if attname == "metadata" else "%s" for _, attname in columns) + ")"
        sql = _VALUES_SQL[rows] = (
            f'INSERT INTO "{Task._meta.db_table}" ({", ".join(f'"{c}"' for c, _ in columns)}) '
            f"VALUES {', '.join([row] * rows)}"
        )
    return sql


def _discard(connection: Any) -> None:
    """Close *connection* for good: its psycopg connection first, so a pool
    (Django's ``pool`` option) cannot take it back with a statement or a
    pipeline still open on it."""
    raw = connection.connection
    if raw is not None:
        raw.close()
    connection.close()


def _insert_values(using: str, connection: Any, tasks: Sequence[Task]) -> None:
    sql, params = insert_statement(tasks)
    # Prepared for one task, the latency path; a few rows of mixed optional
    # fields would make a statement per size and pattern of None.
    run(using, sql, params, fetch=False, prepare=len(tasks) == 1)


_SQLITE_INSERT: tuple[str, list[tuple[str, Any]]] | None = None


def _insert_sqlite(connection: Any, tasks: Sequence[Task]) -> None:
    # The ORM compiles an INSERT (and adapts every value generically) on
    # each call; the statement and one adapter per column are built once.
    global _SQLITE_INSERT
    if _SQLITE_INSERT is None:
        qn = connection.ops.quote_name
        fields = Task._meta.concrete_fields
        sql = (
            f"INSERT INTO {qn(Task._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))})"
        )
        _SQLITE_INSERT = (sql, [(f.attname, _sqlite_adapter(f, connection)) for f in fields])
    sql, adapters = _SQLITE_INSERT
    rows = [[adapt(getattr(t, attname)) for attname, adapt in adapters] for t in tasks]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _sqlite_adapter(field: Any, connection: Any) -> Any:
    kind = field.get_internal_type()
    if kind == "DateTimeField":
        return connection.ops.adapt_datetimefield_value
    if kind == "JSONField":
        return lambda value: json.dumps(value)
    if kind == "BinaryField":
        return lambda value: None if value is None else bytes(value)
    return lambda value: value


def mark_leased(using: str, leases: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
    """Move claimed rows to active, each under its own lease id (pairs as two arrays)."""
    ids = sorted(leases)
    with connections[using].cursor() as cursor:
        cursor.execute(
            "UPDATE conveyor_task AS t SET state = 'active', lease_id = v.lease_id, lease_expires_at = %s, "
            "lease_holder = %s, started_at = %s, updated_at = %s, progress = 0, progress_message = '' "
            "FROM unnest(%s::varchar[], %s::varchar[]) AS v(id, lease_id) WHERE t.id = v.id",
            [expires, holder, now, now, ids, [leases[i] for i in ids]],
        )


# Columns an outcome needs from a row (not the payload or result): what an
# ack returns, and what the ORM outcome path reads from a locked row.
OUTCOME_COLUMNS = (
    "id",
    "queue",
    "type",
    "state",
    "lease_id",
    "retried",
    "last_error",
    "retention",
    "has_dependents",
    "concurrency_key",
)


def complete(
    using: str, wanted: dict[str, tuple[str | None, bytes | None]], now: datetime, default_retention: float
) -> list[tuple[Any, ...]]:
    """Complete the rows still active under the given lease; return the winners."""
    return run(using, *complete_statement(wanted, now, default_retention))


def complete_statement(
    wanted: dict[str, tuple[str | None, bytes | None]], now: datetime, default_retention: float, *, by_key: bool = False
) -> tuple[str, list[Any]]:
    """The UPDATE that completes *wanted* (id -> (lease id, result)), returning ``OUTCOME_COLUMNS``.

    Each task matches its own lease (``t.lease_id = v.lease_id`` row by row),
    so no item's lease can vouch for another. Ids are sorted so that two
    acks planned alike lock rows in one order.

    *by_key*: the form for a session that plans with ``enable_seqscan`` off
    (a node's own connections, conveyor.dispatch.loop_lease). There the
    rows are found by primary key ("id = ANY", and a state test no index
    can serve: "IS TRUE"), at most one lookup per result. Planned on
    "state = 'active'" with statistics that say the table is near empty,
    the UPDATE would read the whole partial index of active tasks, every
    active task of the cluster, for each batch of results. The plain form
    is for sessions with the server's settings, where the by-key form can
    be planned as a read of the whole table instead.
    """
    ids = sorted(wanted)
    leases = [wanted[i][0] for i in ids]
    results = [wanted[i][1] for i in ids]
    # One array per column, whatever the batch size: one prepared statement
    # (a VALUES list would make one per size, and per None/bytes pattern).
    params = [now, now, now, default_retention, ids, leases, results]
    if by_key:
        return _COMPLETE_BY_KEY, [*params, ids]
    return _COMPLETE, params


_COMPLETE_SQL = (
    "UPDATE conveyor_task AS t SET state = 'completed', finished_at = %s, updated_at = %s, "
    "purge_at = %s::timestamptz + make_interval(secs => coalesce(t.retention, %s)), "
    "lease_expires_at = NULL, progress = 100, result = v.result "
    "FROM unnest(%s::varchar[], %s::varchar[], %s::bytea[]) AS v(id, lease_id, result) "
    "WHERE {match}t.id = v.id AND t.lease_id = v.lease_id AND {state} "
    f"RETURNING {', '.join(f't.{c}' for c in OUTCOME_COLUMNS)}"
)
_COMPLETE = _COMPLETE_SQL.format(match="", state="t.state = 'active'")
_COMPLETE_BY_KEY = _COMPLETE_SQL.format(match="t.id = ANY(%s::varchar[]) AND ", state="(t.state = 'active') IS TRUE")
