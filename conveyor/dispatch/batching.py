"""Coalescing helpers of a node: acks, wakes, events, dependency resolution.

Each collects what arrives within one loop turn (or a short window) and
does it with one database transaction or one channel-layer message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.conf import conveyor_settings
from conveyor.events import as_dicts
from conveyor.notify.groups import EVENTS_GROUP, queue_group
from conveyor.notify.layer import EVENT_FLUSH_DELAY, events_message, wake_message

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node
    from conveyor.events import Event
    from conveyor.models import Task
    from conveyor.store import Runner

logger = logging.getLogger("conveyor.dispatch")

ACK_BATCH_MAX = 1000
ACK_FLUSHES = 2  # concurrent ack transactions
ACK_RETRIES = (0.1, 0.5, 2.0, 5.0)


class AckBatcher:
    """Acks that arrive together commit together."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.pending: list[tuple[Task, bytes | None, Runner]] = []
        self.flushing = 0
        self._scheduled = False
        self.committed = 0

    def submit(self, task: Task, result: bytes | None, by: Runner) -> None:
        self.pending.append((task, result, by))
        if not self._scheduled:
            self._scheduled = True
            self.node.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        while self.pending and self.flushing < ACK_FLUSHES:
            batch, self.pending = self.pending[:ACK_BATCH_MAX], self.pending[ACK_BATCH_MAX:]
            self.flushing += 1
            self.node.spawn(self._commit(batch))

    async def _commit(self, batch: list[tuple[Task, bytes | None, Runner]]) -> None:
        try:
            for attempt, pause in enumerate((*ACK_RETRIES, None)):
                try:
                    lost = await self._ack(batch)
                    break
                except Exception:
                    if pause is None:
                        logger.exception("giving up acking %d tasks; their leases will expire and retry", len(batch))
                        return
                    logger.warning(
                        "ack of %d tasks failed (attempt %d); retrying", len(batch), attempt + 1, exc_info=True
                    )
                    await asyncio.sleep(pause)
            self.committed += len(batch) - len(lost)
            if lost:
                logger.info("dropped %d results whose lease was lost: %s", len(lost), ", ".join(lost[:10]))
        finally:
            self.flushing -= 1
            if self.pending:
                self._flush()

    def _ack(self, batch: list[tuple[Task, bytes | None, Runner]]) -> Any:
        """On the node's own connections from the loop where leases go; else in a database thread."""
        if self.node.leaser is not None:
            return self.node.leaser.ack(batch)
        return self.node.db.run(self.node.broker.ack_many, batch)

    async def drain(self, timeout: float) -> None:
        deadline = self.node.loop.time() + timeout
        while (self.pending or self.flushing) and self.node.loop.time() < deadline:
            await asyncio.sleep(0.01)


class Waker:
    """Wake dispatchers: this node's directly, other nodes' through the layer.

    Only queues another live node dispatches are sent through the layer; a
    burst of enqueues to one queue costs one channel-layer message at a time
    per queue (one in flight, at most one more queued behind it).
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self._inflight: set[str] = set()
        self._again: set[str] = set()
        self.sent = 0

    def wake(self, queues: Sequence[str], at: datetime | None = None) -> None:
        stamp = at.timestamp() if at is not None else None
        for queue in queues:
            dispatcher = self.node.dispatchers.get(queue)
            if dispatcher is not None:
                dispatcher.on_wake(stamp)
            if not self.node.shared_layer or queue not in self.node.remote_queues:
                continue  # no other node dispatches this queue
            if stamp is not None:
                self.node.spawn(self._send(queue, at))
            elif queue in self._inflight:
                self._again.add(queue)
            else:
                self._inflight.add(queue)
                self.node.spawn(self._send_coalesced(queue))

    async def _send(self, queue: str, at: datetime | None) -> None:
        try:
            await self.node.layer.group_send(queue_group(queue), wake_message(queue, at))
            self.sent += 1
        except Exception:
            logger.warning("wake for queue %s not sent (the reaper will catch up)", queue, exc_info=True)

    async def _send_coalesced(self, queue: str) -> None:
        try:
            while True:
                self._again.discard(queue)
                await self._send(queue, None)
                if queue not in self._again:
                    break
        finally:
            self._inflight.discard(queue)


class EventBus:
    """Lifecycle events, published to the events group in batches."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.buffer: list[Event] = []
        self._scheduled = False
        self.listeners: list[Any] = []  # in-process callables (metrics, history)
        self.publishing = conveyor_settings.EVENTS  # to /ws/events and SSE subscribers

    def add(self, events: Sequence[Event]) -> None:
        for listener in self.listeners:
            listener(events)
        if not self.publishing:
            return
        self.buffer.extend(events)
        if not self._scheduled:
            self._scheduled = True
            self.node.loop.call_later(EVENT_FLUSH_DELAY, self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        events, self.buffer = self.buffer, []
        if events:
            self.node.spawn(self._send(events_message(as_dicts(events))))

    async def _send(self, message: dict[str, Any]) -> None:
        try:
            await self.node.layer.group_send(EVENTS_GROUP, message)
        except Exception:
            logger.debug("events dropped (channel layer unavailable)", exc_info=True)


class Resolver:
    """Dependency resolution off the hot path, a bounded number at a time."""

    def __init__(self, node: Node, concurrency: int = 2) -> None:
        self.node = node
        self.pending: list[str] = []
        self.running = 0
        self.concurrency = concurrency

    def submit(self, task_ids: Sequence[str]) -> None:
        self.pending.extend(task_ids)
        self._start()

    def _start(self) -> None:
        while self.pending and self.running < self.concurrency:
            batch, self.pending = self.pending[:500], self.pending[500:]
            self.running += 1
            self.node.spawn(self._run(batch))

    async def _run(self, batch: list[str]) -> None:
        try:
            await self.node.db.run(self.node.broker.resolve_dependents, batch)
        except Exception:
            logger.warning("resolving dependents of %d tasks failed; the reaper will retry", len(batch), exc_info=True)
        finally:
            self.running -= 1
            self._start()
