"""Broker hooks for processes that are not a node (CLI, Django code, admin).

They reach running nodes through the channel layer: a wake to the queue's
group, events to the events group, cancel requests to the control group.
With the in-memory layer there is nobody else to reach, so they stay quiet
(a node notices such changes through its sweeps).

Every message goes through one event-loop thread per process
(``LayerSender``) and is sent by the layer's own ``group_send``, over the
connections the layer keeps open on that loop (``async_to_sync`` would start
a new loop, and so open new connections, for every message: ~1.6 ms a wake).
The caller does not wait for Redis: the message is put in line and the call
returns. The line keeps the order messages were sent in. A wake of a queue
whose previous wake is still in line is not sent again (the one in line goes
out after both enqueues committed, so it announces both), and a queue is
woken at most once every ``WAKE_INTERVAL``: a wake asked for sooner is held
and sent when the interval is over, standing for every wake asked for
meanwhile (a producer enqueuing one by one sends a few hundred wakes a
second, not one per task; a node that is idle takes such tasks through its
offers anyway, docs/architecture.md "Offers"). Events are
gathered for ``EVENT_FLUSH_DELAY`` into one message, as a node gathers its
own. What Redis refuses, or cannot be reached for, is logged and dropped:
every message is a hint the database and the sweeps back up. Whatever is
still in line when the process exits is sent first.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor.conf import conveyor_settings
from conveyor.events import Event, as_dicts
from conveyor.notify.groups import CONTROL_GROUP, EVENTS_GROUP, queue_group
from conveyor.notify.hooks import InlineHooks

logger = logging.getLogger("conveyor.dispatch")


def wake_message(queue: str, at: datetime | None = None) -> dict[str, Any]:
    return {"type": "conveyor.wake", "queue": queue, "at": at.timestamp() if at else None}


def events_message(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "conveyor.events", "events": events}


SEND_TIMEOUT = 5.0  # seconds one message may take to reach Redis before it is given up
EVENT_FLUSH_DELAY = 0.1  # seconds events are gathered before they go out as one message
WAKE_INTERVAL = 0.005  # seconds: the shortest time between two wakes of one queue
FLUSH_TIMEOUT = 2.0  # seconds the process waits at exit for what is still in line
BACKLOG_MAX = 10_000  # unsent events (a wake or cancel counts one) kept while Redis is slow or away
EVENT_BATCH_MAX = 1_000  # events in one message


def _at_exit(fn: Any) -> None:
    # Before the interpreter's thread pools shut down (concurrent.futures
    # registers the same way): a flush may still need one, e.g. to resolve
    # the Redis host name. Plain atexit handlers run too late for that.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(fn)
    else:  # pragma: no cover (other interpreters)
        atexit.register(fn)


@dataclass(eq=False)
class _Message:
    layer: Any
    group: str
    body: dict[str, Any]
    weight: int  # what it counts against the backlog
    key: Hashable = None  # (a wake) what a later wake must match to be this one


@dataclass(eq=False)
class _EventBatch:
    layer: Any
    events: list[dict[str, Any]]
    queued: bool = False


class LayerSender:
    """A daemon thread with an event loop that sends channel-layer messages in order.

    Callers never wait for Redis (``post``, ``post_events``); ``flush``
    waits until what is in line has gone. Everything shared is guarded by
    one lock, which the loop takes only to pop a message and to count it
    settled.
    """

    def __init__(
        self,
        *,
        send_timeout: float = SEND_TIMEOUT,
        flush_delay: float = EVENT_FLUSH_DELAY,
        backlog_max: int = BACKLOG_MAX,
        batch_max: int = EVENT_BATCH_MAX,
        wake_interval: float = WAKE_INTERVAL,
    ) -> None:
        self.send_timeout, self.flush_delay, self.wake_interval = send_timeout, flush_delay, wake_interval
        self.backlog_max, self.batch_max = backlog_max, batch_max
        self._exit_hooked = False
        self._forked()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=functools.partial(_after_fork, weakref.ref(self)))

    def _forked(self) -> None:
        # Also the fresh state. In a forked child: it has the parent's objects
        # but none of its threads: the lock may have been held at fork, the
        # loop no longer runs, and what is in line is the parent's to send.
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._line: deque[_Message] = deque()
        self._waiting: dict[Hashable, _Message] = {}  # wakes in line, by key
        # Wakes sent less than ``wake_interval`` ago, by key: the wake asked
        # for since (held until the interval is over), or None.
        self._recent: dict[Hashable, _Message | None] = {}
        self._batch: _EventBatch | None = None  # events gathered, not yet in line
        self._draining = False  # whether the loop is sending (or about to)
        self._drainer: asyncio.Task[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._sending_since: float | None = None  # (loop time) when the message being sent left
        self._given_up = False  # whether the watchdog cancelled the send under way
        self._queued = self._done = 0  # messages put in line, and settled, so far
        self._backlog = 0  # the weight of what is gathered or in line
        self.coalesced = 0  # wakes that were one already in line
        self.dropped = 0  # events (a wake or cancel: one) dropped because the backlog was full

    # -- the loop ---------------------------------------------------------------------

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None:
            return self._loop
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                threading.Thread(target=self._run, args=(loop, ready), name="conveyor-layer", daemon=True).start()
                ready.wait()
                self._loop = loop
                if not self._exit_hooked:
                    _at_exit(self.flush)
                    self._exit_hooked = True
        return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def _begin_drain(self) -> None:
        """On the loop: start sending what is in line."""
        assert self._loop is not None
        self._drainer = self._loop.create_task(self._drain())
        if self._watchdog is None:
            self._watchdog = self._loop.call_later(self.send_timeout / 4, self._watch)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if not self._line:
                    self._draining = False
                    return
                message = self._line.popleft()
                if message.key is not None and self._waiting.get(message.key) is message:
                    del self._waiting[message.key]  # a wake asked for from now on is a new one
                    if self.wake_interval > 0:
                        self._recent[message.key] = None
                        loop.call_later(self.wake_interval, self._interval_over, message.key)
            self._sending_since = loop.time()
            try:
                await self._send(message)
            except asyncio.CancelledError:
                if not self._given_up:
                    raise
                self._given_up = False
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
                logger.warning("the channel layer took %.0f s for %s: given up", self.send_timeout, message.group)
            except Exception:  # best effort: a sweep recovers a lost message
                logger.warning("could not reach the channel layer for %s", message.group, exc_info=True)
            finally:
                self._sending_since = None
                with self._lock:
                    self._done += 1
                    self._backlog -= message.weight
                    self._settled.notify_all()

    @staticmethod
    async def _send(message: _Message) -> None:
        try:
            await message.layer.group_send(message.group, message.body)
        except Exception as exc:
            if not _is_connection_error(exc):
                raise
            # A connection Redis closed (a restart, a timeout, CLIENT KILL)
            # fails the first message sent on it, and the layer opens a new
            # one for the next: this one, once more. (If Redis had it before
            # the close, it arrives twice: a second wake costs a look.)
            await message.layer.group_send(message.group, message.body)

    def _watch(self) -> None:
        """On the loop, every quarter of ``send_timeout`` while sending: give up
        a message that has taken ``send_timeout``.

        One timer for the whole line, not one a message (``asyncio.wait_for``
        cost each wake a fifth more CPU).
        """
        assert self._loop is not None
        self._watchdog = None
        drainer = self._drainer
        if drainer is None or drainer.done():
            return
        since = self._sending_since
        if since is not None and self._loop.time() - since >= self.send_timeout and not self._given_up:
            self._given_up = True
            drainer.cancel()
        self._watchdog = self._loop.call_later(self.send_timeout / 4, self._watch)

    def _enter(self, message: _Message) -> bool:
        """Under the lock: put *message* in line; whether the loop must be told."""
        self._line.append(message)
        if message.key is not None:
            self._waiting[message.key] = message
        self._queued += 1
        if self._draining:
            return False
        self._draining = True
        return True

    def _interval_over(self, key: Hashable) -> None:
        """On the loop, ``wake_interval`` after a wake of *key* left: send the one held since, if any."""
        with self._lock:
            held = self._recent.pop(key, None)
            kick = held is not None and self._enter(held)
        if kick:
            self._begin_drain()

    def _release_held(self) -> bool:
        """Under the lock: put every held wake in line now; whether the loop must be told."""
        kick = False
        for key, held in list(self._recent.items()):
            if held is not None:
                self._recent[key] = None
                kick = self._enter(held) or kick
        return kick

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.call_soon_threadsafe(self._begin_drain)

    # -- callers ----------------------------------------------------------------------

    def post(self, layer: Any, group: str, message: dict[str, Any], key: Hashable = None) -> None:
        """Send *message* to *group* soon, after everything already in line.

        With a *key* (a wake), a message of the same layer, group and key
        still in line, or held (``WAKE_INTERVAL``), stands for this one,
        which is not sent; one sent less than ``wake_interval`` ago holds
        this one until the interval is over.
        """
        loop = self._start()
        line_key = None if key is None else (layer, group, key)
        with self._lock:
            if line_key is not None and (line_key in self._waiting or self._recent.get(line_key) is not None):
                self.coalesced += 1
                return
            if line_key is not None and line_key in self._recent:
                if self._backlog < self.backlog_max:
                    self._backlog += 1
                    self._recent[line_key] = _Message(layer, group, message, 1, line_key)
                else:
                    self._count_dropped(1)
                return
            full = self._backlog >= self.backlog_max
            warn = self._count_dropped(1) if full else False
            if not full:
                self._backlog += 1
            kick = not full and self._enter(_Message(layer, group, message, 1, line_key))
        if kick:
            self._kick(loop)
        if warn:
            logger.warning("channel layer backlog full: %d messages dropped so far", self.dropped)

    def post_events(self, layer: Any, events: list[dict[str, Any]]) -> None:
        """Send *events* to the events group soon, gathered with others sent meanwhile.

        At most ``batch_max`` events a message; what would take the backlog
        past ``backlog_max`` is dropped (and counted).
        """
        loop = self._start()
        kick = timer = False
        with self._lock:
            room = max(0, self.backlog_max - self._backlog)
            warn = self._count_dropped(max(0, len(events) - room))
            for start in range(0, min(len(events), room), self.batch_max):
                chunk = events[start : min(start + self.batch_max, room)]
                self._backlog += len(chunk)
                batch = self._batch
                if batch is not None and batch.layer is layer and len(batch.events) + len(chunk) <= self.batch_max:
                    batch.events.extend(chunk)
                    continue
                if batch is not None:  # closed early (full, or another layer's): in line now, in order
                    kick = self._close(batch) or kick
                self._batch = _EventBatch(layer, list(chunk))
                timer = True
            batch = self._batch
        if timer:
            loop.call_soon_threadsafe(loop.call_later, self.flush_delay, self._close_later, batch)
        if kick:
            self._kick(loop)
        if warn:
            logger.warning("channel layer backlog full: %d messages dropped so far", self.dropped)

    def _close(self, batch: _EventBatch) -> bool:
        """Under the lock: close *batch* to new events and put it in line (once);
        whether the loop must be told."""
        if self._batch is batch:
            self._batch = None
        if batch.queued:
            return False
        batch.queued = True
        return self._enter(_Message(batch.layer, EVENTS_GROUP, events_message(batch.events), len(batch.events)))

    def _close_later(self, batch: _EventBatch | None) -> None:
        """On the loop, ``flush_delay`` after *batch* opened."""
        if batch is None:
            return
        with self._lock:
            kick = self._close(batch)
        if kick:
            self._begin_drain()

    def _count_dropped(self, n: int) -> bool:
        """Under the lock: count *n* dropped; whether to say so (logged after the lock)."""
        before, self.dropped = self.dropped, self.dropped + n
        return n > 0 and (before == 0 or before // 1000 != self.dropped // 1000)

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Send the events gathered so far at once, and wait (up to *timeout*)
        until everything in line has gone; whether it has."""
        with self._lock:
            loop, batch = self._loop, self._batch
            kick = batch is not None and self._close(batch)
            kick = self._release_held() or kick
            target = self._queued
        if loop is None:
            return True
        if kick:
            self._kick(loop)
        with self._settled:
            return self._settled.wait_for(lambda: self._done >= target, timeout)

    @property
    def in_line(self) -> int:
        """Messages put in line and not yet settled (sent, refused or given up)."""
        with self._lock:
            return self._queued - self._done


def _is_connection_error(exc: Exception) -> bool:
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
    except ImportError:  # (a layer that is not channels_redis')
        return isinstance(exc, OSError)
    return isinstance(exc, (OSError, RedisConnectionError))


def _after_fork(ref: weakref.ref[LayerSender]) -> None:
    """In a forked child: let the sender start afresh."""
    obj = ref()
    if obj is not None:
        obj._forked()


sender = LayerSender()


class ChannelLayerHooks(InlineHooks):
    """Hooks that reach the nodes through the channel layer (*layer*: the
    settings' default one, found when first needed; *through*: the sender,
    the process's by default)."""

    def __init__(self, layer: Any = None, through: LayerSender | None = None) -> None:
        self._layer: Any = layer
        self._sender = through

    @property
    def layer(self) -> Any:
        if self._layer is None:
            from channels.layers import InMemoryChannelLayer, get_channel_layer

            layer = get_channel_layer()
            self._layer = False if layer is None or isinstance(layer, InMemoryChannelLayer) else layer
        return self._layer

    @property
    def sender(self) -> LayerSender:
        return self._sender or sender

    @property
    def wants_events(self) -> bool:  # type: ignore[override]
        # EVENTS=0 stops publishing from every process, not only from nodes.
        return conveyor_settings.EVENTS and bool(self.layer)

    @property
    def reaches_other_processes(self) -> bool:  # type: ignore[override]
        return bool(self.layer)

    def _send(self, group: str, message: dict[str, Any], key: Hashable = None) -> None:
        if not self.layer:
            return
        try:
            self.sender.post(self.layer, group, message, key)
        except Exception:  # best effort: a sweep recovers a lost message
            logger.warning("could not hand a message for %s to the channel layer", group, exc_info=True)

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        for queue in queues:
            message = wake_message(queue, at)
            self._send(queue_group(queue), message, ("wake", message["at"]))

    def publish(self, events: Sequence[Event]) -> None:
        if not self.layer:
            return
        try:
            self.sender.post_events(self.layer, as_dicts(events))
        except Exception:  # best effort, as for wakes: the change they describe is committed
            logger.warning("could not hand events to the channel layer", exc_info=True)

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        self._send(CONTROL_GROUP, {"type": "conveyor.cancel", "refs": [list(r) for r in refs]})


def fire_group_message(queue: str, group: str, task_type: str) -> dict[str, Any]:
    return {"type": "conveyor.fire_group", "queue": queue, "group": group, "task_type": task_type}


def send_to_queue(queue: str, message: dict[str, Any]) -> None:
    """Send *message* to every node's dispatcher of *queue* (from sync code)."""
    ChannelLayerHooks()._send(queue_group(queue), message)
