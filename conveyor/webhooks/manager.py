"""Run one webhook gateway per active registration, spread across nodes.

Every node runs a manager. A registration is served by the node holding its
advisory lock (always this node on SQLite); a dead node's locks free and a
survivor picks them up on its next pass. Passes run every second, so a
registration added, changed, paused or deleted (from the API, the CLI or the
dashboard) takes effect within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

from conveyor.dispatch.executor import single_writer
from conveyor.models import WebhookStatus
from conveyor.sweepers.leader import LeaderLock
from conveyor.webhooks.gateway import WebhookGateway

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node
    from conveyor.models import WebhookRegistration

logger = logging.getLogger("conveyor.webhooks")

RECONCILE_EVERY = 1.0
STATUS_EVERY = 2.0


def fingerprint(reg: WebhookRegistration) -> tuple[Any, ...]:
    return (
        reg.url,
        sorted(reg.queues.items()),
        reg.concurrency,
        tuple(reg.secrets or ()),
        tuple(reg.batch_types or ()),
        reg.request_timeout,
    )


class WebhookManager:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.gateways: dict[str, WebhookGateway] = {}
        self.fingerprints: dict[str, tuple[Any, ...]] = {}
        self.locks: dict[str, LeaderLock] = {}
        # Locks live on one connection: a thread of our own on PostgreSQL,
        # the node's single database thread on SQLite.
        self._shared_pool = single_writer()
        self._pool = (
            node.db.pool
            if self._shared_pool
            else ThreadPoolExecutor(max_workers=1, thread_name_prefix="conveyor-webhook-locks")
        )
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._stopping = False

    async def start(self) -> None:
        self._task = self.node.spawn(self._run())

    def on_control(self, message: dict[str, Any]) -> None:
        if message.get("what") == "webhooks":
            self._kick.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        await asyncio.gather(*(gw.drain() for gw in self.gateways.values()), return_exceptions=True)
        self.gateways.clear()
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(self._pool, self._release_all), 5)
        except Exception:
            logger.debug("releasing webhook locks failed", exc_info=True)
        if not self._shared_pool:
            self._pool.shutdown(wait=False)

    async def _run(self) -> None:
        last_status = 0.0
        loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                await self.reconcile()
                if loop.time() - last_status >= STATUS_EVERY:
                    last_status = loop.time()
                    await self._write_status()
            except Exception:
                logger.exception("webhook reconcile failed; retrying")
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), RECONCILE_EVERY)

    async def reconcile(self) -> None:
        registrations = await self.node.db.run(self.node.broker.list_webhooks)
        wanted = {r.name: r for r in registrations if not r.paused}
        owned = await asyncio.get_running_loop().run_in_executor(self._pool, self._acquire, sorted(wanted))
        for name in list(self.gateways):
            reg = wanted.get(name)
            if reg is None or name not in owned or fingerprint(reg) != self.fingerprints.get(name):
                await self._stop_gateway(name)
        for name in owned:
            if name not in self.gateways:
                self._start_gateway(wanted[name])

    def _start_gateway(self, reg: WebhookRegistration) -> None:
        gateway = WebhookGateway(self.node, reg)
        self.gateways[reg.name] = gateway
        self.fingerprints[reg.name] = fingerprint(reg)
        gateway.start()
        logger.info("webhook %s: serving %s -> %s", reg.name, ",".join(reg.queues), reg.url)

    async def _stop_gateway(self, name: str) -> None:
        gateway = self.gateways.pop(name, None)
        self.fingerprints.pop(name, None)
        if gateway is not None:
            await gateway.drain()
            logger.info("webhook %s: stopped here (paused, changed, deleted or moved)", name)

    # -- locks (on the manager's own thread and connection) ----------------------------------

    def _acquire(self, names: list[str]) -> list[str]:
        for conn in connections.all(initialized_only=True):
            conn.close_if_unusable_or_obsolete()
        owned = []
        for name in names:
            lock = self.locks.setdefault(name, LeaderLock(f"conveyor.webhook.{name}"))
            if lock.acquire():
                owned.append(name)
        for name in set(self.locks) - set(names):
            self._unlock(name)
        return owned

    def _unlock(self, name: str) -> None:
        lock = self.locks.pop(name, None)
        conn = connections["default"]
        if lock is not None and lock.held and conn.vendor == "postgresql":
            from conveyor.sweepers.leader import NAMESPACE

            with conn.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE, lock.key])

    def _release_all(self) -> None:
        for name in list(self.locks):
            self._unlock(name)
        if not self._shared_pool:
            for conn in connections.all(initialized_only=True):
                conn.close()

    # -- status rows -----------------------------------------------------------------------

    async def _write_status(self) -> None:
        rows = {name: gw.status() for name, gw in self.gateways.items()}
        if rows:
            await self.node.db.run(_save_status, self.node.id, rows)


def _save_status(node_id: str, rows: dict[str, dict[str, Any]]) -> None:
    now = datetime.now(UTC)
    for name, status in rows.items():
        WebhookStatus.objects.update_or_create(name=name, defaults={"node_id": node_id, "updated_at": now, **status})
