"""Leasing (and acks, and one-task enqueues) on the node's event loop, through PostgreSQL connections of its own.

A lease is the one step between a wake and a push. Run in a database
thread it pays two thread hops and contends for the GIL with the loop at
the moment the result comes back (together ~0.3 ms of a ~1.8 ms
enqueue-to-start at a steady rate). Here the one-statement lease runs on a
psycopg ``AsyncConnection`` owned by the node: the loop sends the statement
and goes on serving sockets until PostgreSQL answers. Queues with rate or
concurrency limits, and the random policy, still take the locked path in a
database thread: the statement says so and changes nothing, and from then
on the broker sends that queue straight to the locked path until a locked
lease finds its limits lifted.

Its leases commit without waiting for the WAL flush: the statement sets
``synchronous_commit = off`` for its own transaction (``no_flush_wait`` in
conveyor/store/queries.sql; ``LEASE_ASYNC_COMMIT`` turns it off). Why that is
safe, and what it can cost, is in docs/architecture.md.

The same connections carry the acks (``Broker.ack_on``: the one UPDATE
that completes the results a node received together, committed durably;
``AckBatcher``), which then pay no thread hop either, and the one-INSERT
enqueues of ``POST
/api/v1/tasks`` on the node's fast path: a task with
no id of the caller's, no unique key, no dependencies and no group is
inserted from the loop (``Broker.one_insert_task`` / ``insert_on``),
durably, without the two thread hops of a database thread; any other task
is enqueued in one. The session's ``statement_timeout`` applies to them
too: an INSERT that waits 10 s (a table locked by a migration) fails the
request instead of waiting on, and an ack is retried (``AckBatcher``).

The connections are a ``psycopg_pool.AsyncConnectionPool`` of up to
``DB_THREADS``, opened as leases, acks and enqueues need them (none at
start) with Django's parameters for the database (``application_name``
"conveyor-lease" unless set). The pool's ``configure`` sets each new
session up as Django sets up its own: the session time zone Django's
adapters assume, and ``assume_role``. It plans with ``enable_seqscan`` off: a queue
table is often near empty when it is analyzed, and with statistics that say
"empty" the planner prefers sequential scans to the partial indexes the
statements are written for, so every lease would read the whole table
(completed and dead rows too) for as long as it grows before the next
ANALYZE. Every statement these connections run has an index to use.
They also keep one generic plan per prepared statement
(``plan_cache_mode = force_generic_plan``): left to choose, PostgreSQL
keeps planning the lease for each call whenever its estimate for the
queue at hand differs from the generic one's (as soon as another queue has
a backlog), and planning the lease costs about four times running it. A
statement that runs longer than ``LEASE_STATEMENT_TIMEOUT`` is canceled by
the server, so a stuck lease cannot hold up the node's other queues for
long (they share up to ``DB_THREADS`` connections); waiting for a
connection is bounded the same (``CONNECTION_WAIT``, then
``psycopg_pool.PoolTimeout``). Any error closes the connection it happened
on, and the pool, which discards a connection returned closed or broken,
opens another in its place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import psycopg.sql
from django.db import connections
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

from conveyor.store.postgres import NEVER_AUTOMATICALLY

if TYPE_CHECKING:
    from conveyor.broker import Broker
    from conveyor.broker.types import ItemResult, LeaseBatch, TaskSpec
    from conveyor.models import Task

logger = logging.getLogger("conveyor.dispatch")

APPLICATION_NAME = "conveyor-lease"
T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]
LEASE_STATEMENT_TIMEOUT_MS = 10_000
# How long a lease, ack or enqueue waits for a connection, and a connection
# attempt of the pool's may take: as long as a statement may run.
CONNECTION_WAIT = LEASE_STATEMENT_TIMEOUT_MS / 1000  # s


# A connection the server ended before it could have run the statement
# (terminated, shut down, not yet accepting): trying again cannot repeat work.
ENDED_BY_THE_SERVER = frozenset({"57P01", "57P02", "57P03"})
RETRY_CONNECT_TIMEOUT = 5  # seconds


class LoopLeaser:
    """Up to *size* connections, opened as concurrent leases and enqueues need them.

    One dispatcher leases one batch at a time, so a node needs as many
    connections as queues leasing at the same moment, bounded like its
    database threads (``DB_THREADS``). Enqueues and acks hold at most
    *size* - 1 of them (when there is more than one), so a burst of them
    never leaves the leases waiting for a connection.
    """

    def __init__(self, broker: Broker, size: int = 1) -> None:
        self.broker = broker
        self.size = max(1, size)
        self._other_slots = asyncio.Semaphore(max(1, size - 1))
        self._finishing: set[asyncio.Future[Any]] = set()  # enqueues and acks whose caller may be gone
        self._orphans: set[asyncio.Future[Any]] = set()  # of those, the ones close() stopped waiting for
        self._pool: AsyncConnectionPool[Conn] | None = None  # opened on first use, again after close()

    async def lease(self, queue: str, n: int, holder: str) -> LeaseBatch | None:
        """Lease like ``Broker.lease``; None when the queue needs the locked path."""
        return await self.run(lambda conn: self.broker.lease_on(conn, queue, n, holder))

    async def ack(self, items: Sequence[tuple[Any, ...]]) -> list[str]:
        """Complete leased tasks like ``Broker.ack_many``; the ids whose lease was lost.

        Acks take the connections enqueues may take (at most *size* - 1),
        so a flood of results never leaves the leases waiting either.
        """
        # Once started, an ack runs to the end even if the node's shutdown
        # cancels the caller: cancelled, it would be undone and the tasks
        # run again when their leases expire.
        return await self._to_the_end(self._other(lambda conn: self.broker.ack_on(conn, items)))

    async def enqueue(self, spec: TaskSpec) -> ItemResult | None:
        """Enqueue like ``Broker.enqueue_one``; None when the task needs a database thread.

        Once the INSERT is sent it runs to the end, wakes and events
        included, even if the request is abandoned meanwhile (a client that
        disconnects): a stored task is always announced.
        """
        task = self.broker.one_insert_task(spec)
        if task is None:
            return None
        return await self._to_the_end(self._store(task))

    async def _other(self, fn: Callable[[Conn], Awaitable[T]], *, fresh: bool = False) -> T:
        """``run`` for enqueues and acks: together they hold at most *size* - 1 connections."""
        async with self._other_slots:
            return await self.run(fn, fresh=fresh)

    async def _to_the_end(self, work: Coroutine[Any, Any, T]) -> T:
        """Await *work* in a task of its own that a cancelled caller does not
        stop (``close`` waits for it); its failure, with no caller left, is logged.

        The task starts at once (eager: up to its first wait, in this turn of
        the loop) and hands its outcome to the caller itself, so the caller
        resumes in the turn after the work ends; through ``asyncio.shield`` it
        took two turns more (the task's start, the shield's hand-on).
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[T] = loop.create_future()
        task = asyncio.eager_task_factory(loop, _handing_on(work, outcome))
        if not task.done():
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)
            task.add_done_callback(self._orphans.discard)
        return await outcome  # a cancelled caller cancels only this future

    async def _store(self, task: Task) -> ItemResult:
        """INSERT, and announce, *task*.

        A pooled connection may have been ended by the server while idle (a
        terminated session, a restarted server) or lost on the way: then the
        INSERT is tried once more, at once, on a connection the pool has
        just checked or opened (``run(fresh=True)``). Whether the error
        carries the server's reason (``ENDED_BY_THE_SERVER``) or none (the
        socket was found closed before its answer was read) depends on when
        the end reached the client. The task's id is fixed before the first
        try, so if the first did commit the second meets the primary key and
        the task is still stored once. Any other error (the server refused
        the statement, no connection to be had) is the caller's.
        """
        try:
            stored = await self._other(lambda conn: self.broker.insert_on(conn, task))
        except psycopg.OperationalError as exc:
            if not _ended_by_the_server(exc):
                raise
            logger.warning("enqueue: the server ended a pooled connection (%s); trying a new one", exc)
            await self._other(lambda conn: self.broker.insert_on(conn, task), fresh=True)
        else:
            if not stored:
                raise RuntimeError(f"task id {task.id} is taken")  # a fresh ULID: cannot happen
        return self.broker.announce_inserted(task)

    async def run(self, fn: Callable[[Conn], Awaitable[T]], *, fresh: bool = False) -> T:
        """Await *fn* with a connection of the pool (one of its own while it runs);
        *fresh*: first have the pool test the connections it holds idle and
        replace those that no longer work, and wait for one at most
        ``RETRY_CONNECT_TIMEOUT`` s."""
        pool = await self._open_pool()
        if fresh:
            await pool.check()
        async with pool.connection(RETRY_CONNECT_TIMEOUT if fresh else None) as conn:
            try:
                return await fn(conn)
            except BaseException:
                # Whatever failed (a statement the server canceled, one cut
                # short by a cancelled caller) may have left the session in
                # doubt: closed, the pool discards it and opens another.
                await close_quietly(conn)
                raise

    async def _open_pool(self) -> AsyncConnectionPool[Conn]:
        pool = self._pool
        if pool is None:
            if asyncio.current_task() in self._orphans:  # work that outlived close(): open nothing
                raise PoolClosed("the node's own connections are closed")
            pool = self._pool = AsyncConnectionPool(
                kwargs=self._params(APPLICATION_NAME, CONNECTION_WAIT),
                min_size=0,  # opened as work needs them, none before
                max_size=self.size,
                open=False,
                configure=self._configure,
                name=APPLICATION_NAME,
                timeout=CONNECTION_WAIT,
                reconnect_timeout=CONNECTION_WAIT,
            )
        await pool.open()  # at once when open; two first uses may both get here
        return pool

    def _params(self, application_name: str, timeout: float | None = None) -> dict[str, Any]:
        """Django's connection parameters for the database, for a connection of the node's own."""
        params = connections[self.broker.db].get_connection_params()
        if timeout is not None:
            params["connect_timeout"] = min(int(params.get("connect_timeout") or timeout), int(timeout))
        params.pop("cursor_factory", None)  # Django's is a sync, client-side cursor
        params.setdefault("application_name", application_name)
        params["prepare_threshold"] = NEVER_AUTOMATICALLY
        params["autocommit"] = True
        return params

    async def _configure(self, conn: Conn) -> None:
        """Set a new session up (the pool's ``configure``, and ``connect``'s)."""
        django_conn = connections[self.broker.db]
        await conn.execute(
            # Django's timestamp loaders take the session's time zone to be
            # Django's (it sets it on its own connections); so must we. Plan
            # with the indexes whatever the statistics say, once per
            # prepared statement (module docstring).
            "SELECT set_config('TimeZone', %s, false), set_config('statement_timeout', %s, false),"
            " set_config('enable_seqscan', 'off', false), set_config('plan_cache_mode', 'force_generic_plan', false)",
            [django_conn.timezone_name or "UTC", str(LEASE_STATEMENT_TIMEOUT_MS)],
        )
        role = django_conn.settings_dict["OPTIONS"].get("assume_role")
        if role:
            await conn.execute(psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role)))

    async def connect(self, application_name: str = APPLICATION_NAME) -> Conn:
        """A new connection outside the pool, configured as the pool's (a node's
        LISTEN connection, conveyor.dispatch.offers); the caller closes it."""
        conn = await psycopg.AsyncConnection.connect(**self._params(application_name))
        try:
            await self._configure(conn)
        except BaseException:
            await close_quietly(conn)
            raise
        return conn

    async def close(self, wait: float = 0.0) -> None:
        """Close the pool; first wait up to *wait* s for statements still
        running (a shielded enqueue or ack) to finish. A connection still in
        use is closed when its work gives it back."""
        if self._finishing and wait > 0:
            await asyncio.wait(set(self._finishing), timeout=wait)
        self._orphans |= self._finishing
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def _ended_by_the_server(exc: psycopg.OperationalError) -> bool:
    """Whether *exc* says the server ended the connection (with a reason or without a word)."""
    if isinstance(exc, PoolTimeout | PoolClosed | TooManyRequests):  # no connection was had at all
        return False
    return getattr(exc, "sqlstate", None) in ENDED_BY_THE_SERVER | {None}


async def _handing_on[R](work: Coroutine[Any, Any, R], outcome: asyncio.Future[R]) -> None:
    """Run *work*; set its outcome on *outcome*, or, when its caller has gone
    (*outcome* cancelled), log its failure."""
    try:
        value = await work
    except asyncio.CancelledError:
        outcome.cancel()
        raise
    except Exception as exc:
        if outcome.done():
            logger.error("an enqueue or ack whose caller had gone failed", exc_info=exc)
        else:
            outcome.set_exception(exc)
    else:
        if not outcome.done():
            outcome.set_result(value)


async def close_quietly(conn: Conn) -> None:
    """Close a connection of the node's own; a failure to (it is gone anyway) is only logged."""
    try:
        await conn.close()
    except Exception:
        logger.debug("closing a connection of the node's own failed", exc_info=True)
