"""A node: one process serving HTTP/WebSocket plus its background services.

The node owns the per-queue dispatchers, knows its gateways, listens on the
channel layer for wakes and control messages, and batches acks, wakes and
events. Consumers find it through ``current_node()``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from conveyor import __version__, cluster, metrics, stats
from conveyor.broker import Broker, set_broker
from conveyor.conf import conveyor_settings
from conveyor.dispatch.batching import AckBatcher, EventBus, Resolver, Waker
from conveyor.dispatch.dispatcher import QueueDispatcher
from conveyor.dispatch.executor import DatabaseExecutor
from conveyor.dispatch.liveness import Liveness
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.dispatch.offers import OfferBook
from conveyor.ids import random_token
from conveyor.notify.groups import CONTROL_GROUP, queue_group
from conveyor.notify.hooks import BrokerHooks

if TYPE_CHECKING:
    from conveyor.broker.types import LeaseBatch
    from conveyor.dispatch.gateway import Gateway
    from conveyor.events import Event

logger = logging.getLogger("conveyor.node")

_current: Node | None = None
LISTEN_BACKOFF_MAX = 5.0
REJOIN_EVERY = 600.0
LEASER_CLOSE_WAIT = 5.0  # s: enqueues and acks already sent finish before the connections close


def current_node() -> Node | None:
    return _current


def apply_static_config(broker: Broker) -> None:
    """Upsert the webhook registrations and cron entries declared in settings.

    Entries are matched by name/id; a cron entry whose definition did not
    change keeps its next run (a restart does not skip or repeat a slot).
    """
    from conveyor.broker.parse import parse_cron, parse_webhook

    for item in conveyor_settings.WEBHOOKS or []:
        broker.upsert_webhook(parse_webhook(item))
    existing = {e.id: e for e in broker.list_cron_entries()}
    for item in conveyor_settings.CRON or []:
        spec = parse_cron(item)
        current = existing.get(spec.id)
        if current is not None and _same_cron(current, spec):
            continue
        broker.upsert_cron_entry(spec)


def _same_cron(entry: Any, spec: Any) -> bool:
    return (
        entry.spec == " ".join(spec.spec.split())
        and entry.timezone == spec.timezone
        and entry.task_type == spec.task_type
        and entry.queue == spec.queue
        and bytes(entry.payload) == bytes(spec.payload)
        and entry.content_type == spec.content_type
        and entry.options == dict(spec.options)
        and entry.paused == spec.paused
    )


class NodeHooks(BrokerHooks):
    """Broker hooks of a node: called from database threads, run on the loop."""

    # Always: the node's metrics and history charts count events even when
    # CONVEYOR_EVENTS=0 turns off publishing them to subscribers.
    wants_events = True

    def __init__(self, node: Node) -> None:
        self.node = node

    def wake(self, queues: Any, at: datetime | None = None) -> None:
        self.node.call_soon(self.node.waker.wake, list(queues), at)

    def publish(self, events: Sequence[Event]) -> None:
        self.node.call_soon(self.node.events.add, list(events))

    def resolve(self, broker: Any, task_ids: Sequence[str]) -> None:
        self.node.call_soon(self.node.resolver.submit, list(task_ids))

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        self.node.call_soon(self.node.cancel_running, [tuple(r) for r in refs], True)


class Node:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, dev: bool = False) -> None:
        self.id = f"{socket.gethostname()}-{os.getpid()}-{random_token(4).lower()}"
        self.host, self.port, self.dev = host, port, dev
        self.broker = Broker(hooks=NodeHooks(self))
        self.db = DatabaseExecutor(conveyor_settings.DB_THREADS)
        # On PostgreSQL, leases, acks and one-INSERT enqueues run on the loop
        # over connections of the node's own, and drained queues offer their
        # idle credit (conveyor.dispatch.loop_lease, conveyor.dispatch.offers).
        on_loop = self.broker.store.has_offers  # (PostgreSQL)
        self.leaser = LoopLeaser(self.broker, conveyor_settings.DB_THREADS) if on_loop else None
        self.offers = OfferBook(self) if on_loop else None
        # A lock PostgreSQL frees when this process dies: survivors then
        # rescue its leases at once (conveyor.dispatch.liveness).
        self.liveness = Liveness(self) if on_loop and self.broker.store.has_liveness else None
        self.layer: Any = get_channel_layer()
        self.shared_layer = not isinstance(self.layer, InMemoryChannelLayer)
        self.dispatchers: dict[str, QueueDispatcher] = {}
        self.gateways: dict[str, Gateway] = {}
        self.leases: dict[str, Gateway] = {}  # task id -> gateway holding it
        self.acks = AckBatcher(self)
        self.waker = Waker(self)
        self.events = EventBus(self)
        self.events.listeners.append(metrics.count_events)
        self.stats = stats.Tally()
        self.events.listeners.append(self.stats.add)
        self.resolver = Resolver(self)
        self.services: list[Any] = []  # objects with async start() / stop()
        self.leader_of: set[str] = set()
        # Queues other nodes dispatch (from their heartbeats, plus what they
        # announced since): only these need a wake through the layer.
        self.remote_queues: set[str] = set()
        self._announced: dict[str, float] = {}  # queue -> when (loop time)
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.channel: str | None = None
        self.stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._groups: set[str] = {CONTROL_GROUP}
        self._loop_thread: int | None = None

    # -- loop plumbing ---------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], *, eager: bool = False) -> asyncio.Task[Any]:
        """Run *coro* in the background; keep a reference so it is not collected.

        *eager*: run it now, up to its first wait (a frame's write to a
        socket then happens in this turn of the loop, not the next).
        """
        task = asyncio.eager_task_factory(self.loop, coro) if eager else self.loop.create_task(coro)
        if task.done():
            self._task_done(task)
            return task
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run *fn* on the node's loop, from any thread."""
        if self.loop is None or self.loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        global _current
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        _current = self
        set_broker(self.broker)
        if self.liveness is not None:
            await self.liveness.start()  # before the row: a listed node holds its lock
        await self.db.run(
            cluster.register_node, self.id, self.host, self.port, os.getpid(), __version__, datetime.now(UTC)
        )
        await self.db.run(apply_static_config, self.broker)
        self.spawn(self._listen())
        if self.offers is not None:
            self.spawn(self.offers.listen())
        self.spawn(self._beat())
        self.spawn(self._watch_cancels())
        for service in self.services:
            await service.start()
        logger.info("node %s started (%s layer)", self.id, "shared" if self.shared_layer else "in-memory")

    async def drain(self, timeout: float) -> None:
        """Stop taking work; let tasks in flight report for half of *timeout*;
        give the rest back; flush acks."""
        self.stopping = True
        if self.offers is not None:
            await self.offers.close()
        for service in self.services:
            try:
                await service.stop()
            except Exception:
                logger.exception("stopping %s failed", service)
        gateways = list(self.gateways.values())
        await asyncio.gather(*(gw.shutdown(timeout / 2) for gw in gateways), return_exceptions=True)
        await self.acks.drain(timeout)

    async def stop(self) -> None:
        global _current
        self.stopping = True
        for dispatcher in self.dispatchers.values():
            dispatcher.close()
        if self.offers is not None and self.offers.listening:  # stopped without a drain
            try:
                await asyncio.wait_for(self.offers.close(), 5)
            except TimeoutError:
                logger.warning("withdrawing offers timed out; they expire on their own")
        try:
            await asyncio.wait_for(self.db.run(cluster.remove_node, self.id), 5)
        except Exception:
            logger.warning("could not remove node row", exc_info=True)
        if self.liveness is not None:
            await self.liveness.close()
        for task in list(self._tasks):
            task.cancel()
        if self.leaser is not None:
            await self.leaser.close(wait=LEASER_CLOSE_WAIT)
        if _current is self:
            _current = None
        set_broker(None)

    # -- dispatchers -----------------------------------------------------------------------

    async def lease(self, queue: str, n: int) -> LeaseBatch:
        """Lease for a dispatcher: on the loop when it can, else in a database thread."""
        if self.leaser is not None:
            batch = await self.leaser.lease(queue, n, self.id)
            if batch is not None:
                return batch
        # SQLite, or a queue with limits: the locked path, in a database thread.
        return await self.db.run(self.broker.lease, queue, n, self.id)

    def dispatcher(self, queue: str) -> QueueDispatcher:
        dispatcher = self.dispatchers.get(queue)
        if dispatcher is None:
            dispatcher = self.dispatchers[queue] = QueueDispatcher(self, queue)
            group = queue_group(queue)
            self._groups.add(group)
            if self.channel is not None and self.shared_layer:
                self.spawn(self._join(group))
            if self.shared_layer:
                # Tell the other nodes at once (their heartbeat view lags).
                message = {"type": "conveyor.serving", "queue": queue, "origin": self.id}
                self.spawn(self._safe(self.layer.group_send(CONTROL_GROUP, message)))
        return dispatcher

    def fire_group(self, queue: str, group: str, task_type: str, broadcast: bool = True) -> None:
        """A group is due: this node's dispatcher tries to lease it; other nodes are told too."""
        dispatcher = self.dispatchers.get(queue)
        if dispatcher is not None:
            dispatcher.fire_group(group, task_type)
        if broadcast and self.shared_layer:
            from conveyor.notify.layer import fire_group_message

            message = {**fire_group_message(queue, group, task_type), "origin": self.id}
            self.spawn(self._safe(self.layer.group_send(queue_group(queue), message)))

    def webhook_settled(self, task_id: str, broadcast: bool) -> None:
        """An async webhook delivery was settled by a callback: free its slot wherever it is."""
        gateway = self.leases.get(task_id)
        handler = getattr(gateway, "settled_elsewhere", None)
        if handler is not None:
            handler(task_id)
        elif broadcast and self.shared_layer:
            message = {"type": "conveyor.webhook_settled", "task_id": task_id, "origin": self.id}
            self.spawn(self._safe(self.layer.group_send(CONTROL_GROUP, message)))

    def set_leader(self, name: str, leading: bool) -> None:
        if leading:
            self.leader_of.add(name)
        else:
            self.leader_of.discard(name)

    def register_gateway(self, gateway: Gateway) -> None:
        self.gateways[gateway.key] = gateway
        gateway.attach()

    def unregister_gateway(self, gateway: Gateway) -> None:
        gateway.detach()
        self.gateways.pop(gateway.key, None)

    def cancel_running(self, refs: list[tuple[str, str]], broadcast: bool = False) -> None:
        """Ask the gateways holding these leases to cancel; tell other nodes too."""
        for task_id, lease_id in refs:
            gateway = self.leases.get(task_id)
            if gateway is not None:
                gateway.cancel(task_id, lease_id)
        if broadcast and self.shared_layer:
            message = {"type": "conveyor.cancel", "refs": [list(r) for r in refs], "origin": self.id}
            self.spawn(self._safe(self.layer.group_send(CONTROL_GROUP, message)))

    async def _safe(self, aw: Awaitable[Any]) -> None:
        try:
            await aw
        except Exception:
            logger.warning("channel layer send failed", exc_info=True)

    # -- channel layer ---------------------------------------------------------------------

    async def _join(self, group: str) -> None:
        """Join *group*, retrying while Redis is away (no message for it would arrive)."""
        delay = 0.1
        while self.channel is not None and not self.stopping:
            try:
                await self.layer.group_add(group, self.channel)
                return
            except Exception as exc:
                logger.warning("joining %s failed (%s); retrying in %.1fs", group, exc, delay)
                await asyncio.sleep(delay)
                delay = min(LISTEN_BACKOFF_MAX, delay * 2)

    async def _listen(self) -> None:
        """Receive wakes and control messages; survive a restarted Redis."""
        backoff = 0.1
        while not self.stopping:
            try:
                if self.channel is None:
                    self.channel = await self.layer.new_channel()
                for group in list(self._groups):
                    await self.layer.group_add(group, self.channel)
                joined = self.loop.time()
                while not self.stopping:
                    message = await self.layer.receive(self.channel)
                    backoff = 0.1
                    self._on_message(message)
                    if self.loop.time() - joined > REJOIN_EVERY:
                        break  # refresh group membership (it expires in Redis)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("channel layer receive failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(LISTEN_BACKOFF_MAX, backoff * 2)

    def _on_message(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "conveyor.wake":
            dispatcher = self.dispatchers.get(message.get("queue", ""))
            if dispatcher is not None:
                dispatcher.on_wake(message.get("at"))
        elif kind == "conveyor.fire_group":
            if message.get("origin") != self.id:
                self.fire_group(message["queue"], message["group"], message.get("task_type", ""), broadcast=False)
        elif kind == "conveyor.serving":
            if message.get("origin") != self.id:
                self._announced[message["queue"]] = self.loop.time()
                self.remote_queues.add(message["queue"])
        elif kind == "conveyor.webhook_settled":
            if message.get("origin") != self.id:
                self.webhook_settled(message["task_id"], False)
        elif kind == "conveyor.cancel":
            if message.get("origin") != self.id:
                self.cancel_running([tuple(r) for r in message.get("refs", [])])
        elif kind == "conveyor.control":
            for service in self.services:
                handler = getattr(service, "on_control", None)
                if handler is not None:
                    handler(message)

    # -- heartbeat -------------------------------------------------------------------------

    async def _watch_cancels(self) -> None:
        """Look for cancel requests among our in-flight tasks.

        Without a shared layer, requests made by other processes (the CLI)
        cannot reach us at all: look every second. With Redis, a request
        normally arrives as a message at once; this catches one published
        while we were reconnecting (pub/sub keeps nothing for absent
        subscribers), every ``DISPATCH_SELF_CHECK``.
        """
        from conveyor.states import State

        def requested(ids: list[str]) -> list[tuple[str, str]]:
            rows = self.broker.tasks.filter(id__in=ids, state=State.ACTIVE, cancel_requested=True)
            return list(rows.values_list("id", "lease_id"))

        told: set[tuple[str, str]] = set()
        while not self.stopping:
            await asyncio.sleep(conveyor_settings.DISPATCH_SELF_CHECK if self.shared_layer else 1.0)
            ids = list(self.leases)
            if not ids:
                told.clear()
                continue
            try:
                found = set(await self.db.run(requested, ids))
            except Exception:
                logger.debug("cancel watch failed", exc_info=True)
                continue
            # Tell each delivery once, not on every pass.
            self.cancel_running(sorted(found - told))
            told = found

    async def _beat(self) -> None:
        while not self.stopping:
            await asyncio.sleep(conveyor_settings.NODE_HEARTBEAT_INTERVAL)
            inflight = {key: len(gw.inflight) for key, gw in self.gateways.items()}
            serving = sorted(q for q, d in self.dispatchers.items() if d.slots)
            try:
                others = await self.db.run(
                    cluster.beat, self.id, datetime.now(UTC), sorted(self.leader_of), inflight, self.port, serving
                )
                # An announcement bridges the heartbeat view's lag; after two
                # beats the announcer's own row says whether it still serves.
                horizon = self.loop.time() - 2 * conveyor_settings.NODE_HEARTBEAT_INTERVAL
                self._announced = {q: t for q, t in self._announced.items() if t > horizon}
                self.remote_queues = others | set(self._announced)
                counts = self.stats.take()
                if counts:
                    await self.db.run(stats.save_counts, counts)
            except Exception:
                logger.warning("node heartbeat failed", exc_info=True)
