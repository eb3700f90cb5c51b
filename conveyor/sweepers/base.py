"""Sweepers: small plugins with ``run_once() -> report``, run on the leader only."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.db import connections

from conveyor.conf import conveyor_settings
from conveyor.metrics import MAINTENANCE_FAILURES
from conveyor.sweepers.leader import LeaderLock

if TYPE_CHECKING:
    from conveyor.broker import Broker

logger = logging.getLogger("conveyor.sweepers")


class Sweeper:
    """One maintenance pass; subclasses set ``name``, ``interval_setting`` and ``run_once``."""

    name = "sweeper"
    interval_setting = ""

    def __init__(self, broker: Broker, node: Any = None) -> None:
        self.broker = broker
        self.node = node

    @property
    def interval(self) -> float:
        return float(getattr(conveyor_settings, self.interval_setting))

    def run_once(self) -> dict[str, int]:
        raise NotImplementedError


class SweeperLoop:
    """Run a sweeper every interval, on its own thread, while leading.

    The thread is the sweeper's own so that the database connection holding
    its advisory lock is always the same one. A pass that raises is logged
    and retried next tick; it never stops the loop.
    """

    def __init__(self, sweeper: Sweeper, on_leadership: Any = None, pool: ThreadPoolExecutor | None = None) -> None:
        self.sweeper = sweeper
        self.lock = LeaderLock(f"conveyor.sweeper.{sweeper.name}")
        self.on_leadership = on_leadership
        # A shared pool (the node's single SQLite thread) is used as is and
        # never shut down here; otherwise the sweeper has its own thread.
        self._shared_pool = pool is not None
        self._pool = pool or ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"conveyor-{sweeper.name}")
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.leading = False
        self.passes = 0
        self._last_report: dict[str, int] = {}

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(self._pool, self._release), 5)
        except Exception:
            logger.debug("releasing %s lock failed", self.sweeper.name, exc_info=True)
        if not self._shared_pool:
            self._pool.shutdown(wait=False)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                leading = await loop.run_in_executor(self._pool, self.tick)
            except Exception:
                logger.exception("%s pass failed; retrying next tick", self.sweeper.name)
                MAINTENANCE_FAILURES.labels(self.sweeper.name).inc()
                leading = False
            self._set_leading(leading)
            await asyncio.sleep(self.sweeper.interval)

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            logger.info("%s: %s", self.sweeper.name, "now leading" if leading else "no longer leading")
        self.leading = leading
        if self.on_leadership is not None:
            self.on_leadership(self.sweeper.name, leading)

    def tick(self) -> bool:
        """One tick on the sweeper thread: take or keep the lock, then sweep."""
        for conn in connections.all(initialized_only=True):
            conn.close_if_unusable_or_obsolete()
        if not self.lock.acquire():
            return False
        report = self.sweeper.run_once()
        self.passes += 1
        if any(report.values()):
            # One line per pass that did something; a pass repeating the last
            # one (a group nobody can take yet, a queue woken every tick) is
            # only worth a debug line.
            level = logging.DEBUG if report == self._last_report else logging.INFO
            logger.log(level, "%s: %s", self.sweeper.name, " ".join(f"{k}={v}" for k, v in report.items()))
        self._last_report = report
        return True

    def _release(self) -> None:
        self.lock.release()
        if not self._shared_pool:
            for conn in connections.all(initialized_only=True):
                conn.close()
