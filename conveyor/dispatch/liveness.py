"""A node's liveness lock, held on a PostgreSQL connection of its own for as long as the node runs.

PostgreSQL frees a session's advisory locks when the session ends: the
moment the node's process dies, its connections close and the lock is
free. The leader's rescuer (conveyor/sweepers/rescuer.py) looks for nodes
whose lock is free and settles their leases at once instead of waiting for
them to expire (docs/architecture.md, "Node death"). The lock is
(``cluster.LIVENESS_NAMESPACE``, ``cluster.liveness_key(node id)``): the key
the node's row records.

The lock is taken before the node registers, so a node is never listed
without it. Every ``cluster.LIVENESS_CHECK`` seconds the node asks its lock
connection whether it still holds the lock, taking it again on a new
connection if the old one is gone (a PostgreSQL restart,
``pg_terminate_backend``): a survivor waits ``cluster.DEATH_CONFIRM``
before it acts, so a live node has its lock back by then. A node that is
merely slow keeps its lock: its session lives on whatever its event loop
does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from conveyor import cluster
from conveyor.dispatch.loop_lease import close_quietly

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node

logger = logging.getLogger("conveyor.node")

APPLICATION_NAME = "conveyor-liveness"  # the lock connection's, in pg_stat_activity
CHECK_TIMEOUT = 5.0  # s: a check that takes longer replaces the connection


class Liveness:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.key = cluster.liveness_key(node.id)
        self.held = False
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Take the lock (before the node registers), then keep it."""
        await self._hold()
        if not self.held:
            # Another session holds this key (two node ids whose keys
            # collide): survivors take this node for alive, and if it dies
            # its tasks wait for their leases to expire, as before.
            logger.warning("node %s: its liveness lock is held by another session", self.node.id)
        self._task = self.node.spawn(self._keep())

    async def close(self) -> None:
        """Let the lock go (the node has given its tasks back and left the cluster table)."""
        if self._task is not None:
            self._task.cancel()
        conn, self._conn, self.held = self._conn, None, False
        if conn is not None:
            await close_quietly(conn)

    async def _hold(self) -> None:
        if self._conn is None or self._conn.closed:
            self._conn = await self.node.leaser.connect(APPLICATION_NAME)
        store: Any = self.node.broker.store
        self.held = await store.ahold_liveness(self._conn, cluster.LIVENESS_NAMESPACE, self.key)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(cluster.LIVENESS_CHECK)
            was = self.held
            try:
                await asyncio.wait_for(self._hold(), CHECK_TIMEOUT)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if was:
                    logger.warning("node %s: liveness lock connection lost (%s); taking it again", self.node.id, exc)
                self.held = False
                conn, self._conn = self._conn, None
                if conn is not None:
                    await close_quietly(conn)
                continue
            if self.held and not was:
                logger.info("node %s: liveness lock held again", self.node.id)
