"""Leasing on the node's event loop, through a PostgreSQL connection of its own.

A lease is the one step between a wake and a push. Run in a database
thread it pays two thread hops and contends for the GIL with the loop at
the moment the result comes back (together ~0.3 ms of a ~1.8 ms
enqueue-to-start at a steady rate). Here the one-statement lease runs on a
psycopg ``AsyncConnection`` owned by the node: the loop sends the statement
and goes on serving sockets until PostgreSQL answers. Queues with rate or
concurrency limits, and the random policy, still take the locked path in a
database thread (the statement says so and changes nothing).

The connection is opened on first use with Django's parameters for the
database (``application_name`` "conveyor-lease" unless set) and configured
as Django configures its own: the session time zone Django's adapters
assume, and ``assume_role``. A statement that runs longer than
``LEASE_STATEMENT_TIMEOUT`` is canceled by the server, so a stuck lease
cannot hold up the node's other queues (they share the connection). Any
error drops the connection: the next lease opens a new one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.sql
from django.db import connections

from conveyor.broker import pg

if TYPE_CHECKING:
    from conveyor.broker import Broker
    from conveyor.broker.types import LeaseBatch
    from conveyor.dispatch.executor import DatabaseExecutor

logger = logging.getLogger("conveyor.dispatch")

APPLICATION_NAME = "conveyor-lease"
LEASE_STATEMENT_TIMEOUT_MS = 10_000


class LoopLeaser:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the connection

    async def start(self, db: DatabaseExecutor) -> None:
        await db.run(self.broker.compile_lease_statements)  # compiling needs Django's connection

    async def lease(self, queue: str, n: int, holder: str) -> LeaseBatch | None:
        """Lease like ``Broker.lease``; None when the queue needs the locked path."""
        async with self._lock:
            conn = await self._connection()
            try:
                return await self.broker.lease_on(conn, queue, n, holder)
            except BaseException:
                await self._drop()
                raise

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            django_conn = connections[self.broker.db]
            params = django_conn.get_connection_params()
            params.pop("cursor_factory", None)  # Django's is a sync, client-side cursor
            params.setdefault("application_name", APPLICATION_NAME)
            params["prepare_threshold"] = pg.NEVER_AUTOMATICALLY
            conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            try:
                # Django's timestamp loaders take the session's time zone to be
                # Django's (it sets it on its own connections); so must we.
                await conn.execute("SELECT set_config('TimeZone', %s, false)", [django_conn.timezone_name or "UTC"])
                await conn.execute(
                    "SELECT set_config('statement_timeout', %s, false)", [str(LEASE_STATEMENT_TIMEOUT_MS)]
                )
                role = django_conn.settings_dict["OPTIONS"].get("assume_role")
                if role:
                    await conn.execute(psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role)))
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:
                logger.debug("closing the lease connection failed", exc_info=True)

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
