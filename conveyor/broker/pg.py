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

import itertools
import json
import operator
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connections, models
from psycopg import adapt, generators

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


# Appended to a one-row INSERT in autocommit: its own transaction commits
# without waiting for the WAL flush (``set_config(..., true)`` is local to
# that transaction), so the row is visible to other sessions at once but
# not yet durable; ``WAIT_DURABLE`` then waits for the flush.
VISIBLE_FIRST = " RETURNING set_config('synchronous_commit', 'off', true)"
# A transaction that writes WAL commits with the session's
# ``synchronous_commit`` (on): it waits until the WAL is flushed up to its
# own commit record, so up to every commit before it, on any session. A
# transactional logical message is the smallest such write (no table, any
# role, any ``wal_level``; logical decoding sees it under the prefix
# "conveyor"). Merely taking a transaction id is not enough: a transaction
# that wrote no WAL before its commit record commits without the flush.
WAIT_DURABLE = "SELECT pg_logical_emit_message(true, 'conveyor', '')"
_WAIT_DURABLE = WAIT_DURABLE.encode()


def while_flushing(using: str, fn: Callable[[], None]) -> None:
    """Call *fn* while the server flushes the WAL; return once everything
    committed on the server before this call is on disk.

    ``WAIT_DURABLE`` is sent first and its answer read after *fn*, so the
    flush and *fn* (a wake's round trip to Redis) overlap. Outside a
    transaction only. *fn* runs while a statement is in flight on this
    database's connection: it must not use it. Any error closes the
    connection: a statement whose answer was never read cannot be left on it.
    """
    connection = connections[using]
    connection.ensure_connection()
    raw = connection.connection
    try:
        with connection.wrap_database_errors:
            raw.wait(_flush_gen(raw.pgconn, fn))
    except BaseException:
        _discard(connection)
        raise


def _discard(connection: Any) -> None:
    """Close *connection* for good: its psycopg connection first, so a pool
    (Django's ``pool`` option) cannot take it back with a statement or a
    pipeline still open on it."""
    raw = connection.connection
    if raw is not None:
        raw.close()
    connection.close()


def insert_then_flush(
    using: str, sql: str, params: Sequence[Any], then: Callable[[tuple[Any, ...]], None]
) -> tuple[Any, ...]:
    """Run a one-row INSERT that commits visible first (its *sql* ends in
    ``VISIBLE_FIRST``'s RETURNING), call *then* with its row while the server
    flushes the WAL, and return the row once everything committed before is
    on disk: ``run`` followed by ``while_flushing``, in one round trip.

    Both statements go out in one write (libpq's pipeline mode, each its own
    transaction), so the flush starts as the INSERT commits rather than a
    round trip later. The INSERT runs as a prepared statement of this
    module's own, one per statement and parameter types and connection.
    Outside a transaction only; *then* must not use the connection. Any
    error closes the connection (as in ``while_flushing``). Without prepared
    statements or pipeline support, the two steps run one after the other.
    """
    connection = connections[using]
    if not (conveyor_settings.PREPARED_STATEMENTS and psycopg.Pipeline.is_supported()):
        row = run(using, sql, params)[0]
        while_flushing(using, lambda: then(row))
        return row
    connection.ensure_connection()
    raw = connection.connection
    if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise psycopg.ProgrammingError("insert_then_flush runs outside a transaction only")

    def guarded(row: tuple[Any, ...]) -> None:
        with connection.execute_wrapper(_busy):
            then(row)

    try:
        with connection.wrap_database_errors:
            return raw.wait(_insert_then_flush_gen(raw, sql, params, guarded))
    except BaseException:
        _discard(connection)
        raise


def _busy(*args: Any) -> None:
    # Another statement now would be queued behind the flush's in the pipeline
    # and take its answer.
    raise RuntimeError("the connection is busy with an enqueue's flush: a broker hook must not use it")


# Statements ``insert_then_flush`` and ``execute_prepared`` prepared, per connection:
# (sql, parameter types) -> name (at most ``PIPELINED_MAX`` of them, and the flush's).
# A statement found missing (psycopg's DEALLOCATE ALL) is forgotten when it is
# next used, and prepared again.
# Names are never reused in a process, so a name can only be missing, never taken.
_PIPELINED: weakref.WeakKeyDictionary[Any, dict[tuple[str, tuple[int, ...]], bytes]] = weakref.WeakKeyDictionary()
_PIPELINED_NAMES = itertools.count()
PIPELINED_MAX = 32  # statements per connection (psycopg keys its own by parameter types too)
_FLUSH_KEY = (WAIT_DURABLE, ())


def _insert_then_flush_gen(raw: Any, sql: str, params: Sequence[Any], then: Callable[[tuple[Any, ...]], None]) -> Any:
    pgconn = raw.pgconn
    tx, values, types = _dumped(raw, params)
    names = _PIPELINED.setdefault(raw, {})
    for attempt in (1, 2):
        insert = yield from _prepared(pgconn, names, sql, types, bounded=True)
        # The flush's statement too: planned once, it answers sooner.
        wait = yield from _prepared(pgconn, names, *_FLUSH_KEY, bounded=False)
        pgconn.enter_pipeline_mode()
        pgconn.send_query_prepared(insert, values, param_formats=tx.formats)
        pgconn.pipeline_sync()
        pgconn.send_query_prepared(wait, None)
        pgconn.pipeline_sync()
        yield from generators.send(pgconn)
        inserted = yield from generators.fetch_many(pgconn)  # its result, then its sync
        synced = yield from generators.fetch_many(pgconn)
        if attempt == 1 and _statement_missing(inserted):
            # The session's prepared statements were dropped (psycopg sends
            # DEALLOCATE ALL after a ROLLBACK, a DROP or an ALTER on this
            # connection): nothing was inserted; prepare them again and retry.
            _check_sync(synced, pgconn)
            names.pop((sql, types), None)
            flushed = yield from generators.fetch_many(pgconn)
            if _statement_missing(flushed):
                names.pop(_FLUSH_KEY, None)
            else:
                _check(flushed, pgconn, WAIT_DURABLE)
            _check_sync((yield from generators.fetch_many(pgconn)), pgconn)
            pgconn.exit_pipeline_mode()
            continue
        try:
            _check(inserted, pgconn, "INSERT")
            _check_sync(synced, pgconn)
            row = _first_row(tx, inserted[0])
            then(row)
        finally:
            flushed = yield from generators.fetch_many(pgconn)
            synced = yield from generators.fetch_many(pgconn)
        _check_sync(synced, pgconn)
        pgconn.exit_pipeline_mode()
        if _statement_missing(flushed):  # (dropped alone, by a DEALLOCATE of its name)
            names.pop(_FLUSH_KEY, None)
            pgconn.send_query(_WAIT_DURABLE)
            yield from generators.send(pgconn)
            flushed = yield from generators.fetch_many(pgconn)
        _check(flushed, pgconn, WAIT_DURABLE)
        return row
    raise AssertionError("unreachable")


async def execute_prepared(conn: Any, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """Run one statement on a psycopg ``AsyncConnection`` that nothing else is
    using, as a prepared statement of this module's own (as ``insert_then_flush``'s),
    and return its first row (None when it returns none).

    psycopg's ``execute`` spends as long again on the way (a cursor, the
    query's conversion, its own statement cache); an error is raised as
    psycopg's (``UniqueViolation``, ...) and leaves the connection as
    ``execute`` would. Outside a transaction only.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise psycopg.ProgrammingError("execute_prepared runs outside a transaction only")
    if not conveyor_settings.PREPARED_STATEMENTS:
        cursor = await conn.execute(sql, params)
        return await cursor.fetchone() if cursor.pgresult and cursor.pgresult.ntuples else None
    return await conn.wait(_execute_prepared_gen(conn, sql, params))


def _execute_prepared_gen(raw: Any, sql: str, params: Sequence[Any]) -> Any:
    pgconn = raw.pgconn
    tx, values, types = _dumped(raw, params)
    names = _PIPELINED.setdefault(raw, {})
    for attempt in (1, 2):
        name = yield from _prepared(pgconn, names, sql, types, bounded=True)
        pgconn.send_query_prepared(name, values, param_formats=tx.formats)
        yield from generators.send(pgconn)
        results = yield from generators.fetch_many(pgconn)
        if attempt == 1 and _statement_missing(results):  # dropped (see _insert_then_flush_gen): again
            names.pop((sql, types), None)
            continue
        _check(results, pgconn, "a statement")
        return _first_row(tx, results[0]) if results[0].ntuples else None
    raise AssertionError("unreachable")


def _dumped(raw: Any, params: Sequence[Any]) -> tuple[Any, list[Any], tuple[int, ...]]:
    """A transformer for *raw*'s statements, *params* dumped by it, and their types' oids.

    One transformer per connection, kept for it, as a psycopg cursor keeps
    one for all its statements (it caches a dumper per type: a new one per
    statement costs three times as long). ``insert_then_flush`` and
    ``execute_prepared`` have their connection to themselves, and so their
    transformer.
    """
    tx = _TRANSFORMERS.get(raw)
    if tx is None:
        tx = _TRANSFORMERS[raw] = adapt.Transformer(_WeakContext(raw))
    values = tx.dump_sequence(params, [adapt.PyFormat.AUTO] * len(params))
    return tx, values, tuple(tx.types)


class _WeakContext:
    """What a transformer needs of its connection (psycopg's ``AdaptContext``),
    without keeping it alive: a connection dropped unclosed is freed at once
    (and its server session ends), as before it had a transformer kept."""

    __slots__ = ("adapters", "connection")

    def __init__(self, raw: Any) -> None:
        self.adapters = raw.adapters
        self.connection = weakref.proxy(raw)


_TRANSFORMERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _first_row(tx: Any, result: Any) -> tuple[Any, ...]:
    tx.set_pgresult(result)
    return tx.load_row(0, tuple)


def _prepared(
    pgconn: Any, names: dict[tuple[str, tuple[int, ...]], bytes], sql: str, types: tuple[int, ...], *, bounded: bool
) -> Any:
    """The name of this connection's statement for *sql* and parameter
    *types*, prepared now if it is not yet (a generator for ``wait``).

    *bounded*: at ``PIPELINED_MAX`` such statements, every bounded one goes
    before a new one is prepared (each pattern of None among an INSERT's
    optional fields is a statement of its own); the flush's is not bounded.
    """
    name = names.get((sql, types))
    if name is not None:
        return name
    if bounded:
        several = [key for key in names if key != _FLUSH_KEY]
        if len(several) >= PIPELINED_MAX:
            for key in several:
                pgconn.send_query(b"DEALLOCATE " + names.pop(key))
                yield from generators.send(pgconn)
                gone = yield from generators.fetch_many(pgconn)
                if not _statement_missing(gone):  # (dropped already by a DEALLOCATE ALL)
                    _check(gone, pgconn, "DEALLOCATE")
    name = f"conveyor_pipelined_{next(_PIPELINED_NAMES)}".encode()
    pgconn.send_prepare(name, _numbered(sql).encode(), param_types=types)
    yield from generators.send(pgconn)
    _check((yield from generators.fetch_many(pgconn)), pgconn, "PREPARE")
    names[(sql, types)] = name
    return name


def _statement_missing(results: list[Any]) -> bool:
    last = results[-1] if results else None
    return (
        last is not None
        and last.status == psycopg.pq.ExecStatus.FATAL_ERROR
        and last.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"26000"  # invalid_sql_statement_name
    )


def _numbered(sql: str) -> str:
    """*sql* with its ``%s`` placeholders as PostgreSQL's ``$1``, ``$2``, … (it has no other ``%``)."""
    parts = sql.split("%s")
    if any("%" in part for part in parts):
        raise ValueError("a statement for insert_then_flush may hold no % but its placeholders")
    return "".join(f"{part}${i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]


_ANSWERED = (psycopg.pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.COMMAND_OK)
_SYNCED = (psycopg.pq.ExecStatus.PIPELINE_SYNC,)


def _check(results: list[Any], pgconn: Any, what: str, ok: tuple[Any, ...] = _ANSWERED) -> None:
    """Raise unless *results* is one result of an *ok* status: the server's
    error as psycopg's (an error at commit comes where the sync was due)."""
    if len(results) == 1 and results[0].status in ok:
        return
    if results and results[-1].status == psycopg.pq.ExecStatus.FATAL_ERROR:
        raise psycopg.errors.error_from_result(results[-1], encoding=pgconn._encoding)
    raise psycopg.OperationalError(f"unexpected answer to {what}: {[r.status for r in results]}")


def _check_sync(results: list[Any], pgconn: Any) -> None:
    _check(results, pgconn, "a pipeline sync", _SYNCED)


def _flush_gen(pgconn: Any, fn: Callable[[], None]) -> Any:
    """``while_flushing``'s exchange, as a generator for psycopg's ``Connection.wait``."""
    pgconn.send_query(_WAIT_DURABLE)
    yield from generators.send(pgconn)
    try:
        fn()
    finally:
        results = yield from generators.fetch_many(pgconn)
    _check(results, pgconn, WAIT_DURABLE)


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
