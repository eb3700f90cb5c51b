"""Broker hooks for processes that are not a node (CLI, Django code, admin).

They reach running nodes through the channel layer: a wake to the queue's
group, events to the events group, cancel requests to the control group.
With the in-memory layer there is nobody else to reach, so they stay quiet
(a node notices such changes through its sweeps).

Wakes and control messages are on their way to Redis before the caller goes
on. On the pub/sub layer Conveyor configures (one Redis server) they are
one PUBLISH written from the caller's thread on a kept-open connection
(``DirectPublisher``), its reply read when the next one goes out: no event
loop, no thread hop, no round trip. Any other Redis layer (which waits until
Redis has them), and events always, go
through one event loop thread per process (``LayerSender``) that keeps its
Redis connections open (``async_to_sync`` would start a new loop, and so
open new connections, for every message: ~1.6 ms a wake). Events are sent
without holding up the caller, gathered as a node gathers its own: about
one message per ``EVENT_FLUSH_DELAY`` (one per enqueue cost a producer
~0.5 ms of CPU per task, a quarter of its enqueue). Whatever is still
queued or gathered when the process exits is flushed first.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import math
import os
import select
import ssl
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.conf import conveyor_settings
from conveyor.events import Event, as_dicts
from conveyor.notify.groups import CONTROL_GROUP, EVENTS_GROUP, queue_group
from conveyor.notify.hooks import InlineHooks

logger = logging.getLogger("conveyor.dispatch")


def wake_message(queue: str, at: datetime | None = None) -> dict[str, Any]:
    return {"type": "conveyor.wake", "queue": queue, "at": at.timestamp() if at else None}


SEND_TIMEOUT = 5.0  # seconds a caller waits for Redis to take a wake
EVENT_FLUSH_DELAY = 0.1  # seconds events are gathered before they go out as one message
FLUSH_TIMEOUT = 2.0  # seconds the process waits at exit for queued events
BACKLOG_MAX = 10_000  # unsent events kept while Redis is slow or away; more are dropped
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


def events_message(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "conveyor.events", "events": events}


@dataclass(eq=False)
class _EventBatch:
    layer: Any
    events: list[dict[str, Any]]
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)
    queued: bool = False


class LayerSender:
    """A daemon thread with an event loop that sends channel-layer messages in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[Any, str, dict[str, Any], concurrent.futures.Future[None]]] | None = None
        # Event messages not yet settled: how many events each holds;
        # ``_backlog`` is their sum.
        self._pending: dict[concurrent.futures.Future[None], int] = {}
        self._backlog = 0
        self._batch: _EventBatch | None = None  # events gathered, not yet queued
        self._exit_hooked = False
        self.dropped = 0  # events dropped because the backlog was full
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=functools.partial(_after_fork, weakref.ref(self)))

    def _forked(self) -> None:
        # The child has the parent's objects but none of its threads: the
        # lock may have been held at fork, and the loop no longer runs.
        self._lock = threading.Lock()
        self._loop = self._queue = self._batch = None
        self._pending, self._backlog = {}, 0

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

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        self._queue = asyncio.Queue()
        loop.create_task(self._drain(self._queue))
        loop.call_soon(ready.set)
        loop.run_forever()

    async def _drain(self, queue: asyncio.Queue[Any]) -> None:
        while True:
            layer, group, message, done = await queue.get()
            if not done.set_running_or_notify_cancel():
                continue  # the caller gave up waiting: a late wake is no use
            try:
                await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT)
            except BaseException as exc:  # reported to the caller, or logged by _settled
                done.set_exception(exc if isinstance(exc, Exception) else ConnectionError(repr(exc)))
            else:
                done.set_result(None)

    def send(self, layer: Any, group: str, message: dict[str, Any]) -> None:
        """Send *message* to *group* and wait (up to ``SEND_TIMEOUT``) until Redis has it."""
        loop = self._start()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        assert self._queue is not None
        loop.call_soon_threadsafe(self._queue.put_nowait, (layer, group, message, done))
        try:
            done.result(SEND_TIMEOUT)
        except concurrent.futures.TimeoutError:
            done.cancel()
            raise

    def send_events(self, layer: Any, events: list[dict[str, Any]]) -> None:
        """Send *events* to the events group soon, gathered with others sent meanwhile.

        At most ``EVENT_BATCH_MAX`` events a message; what would take the
        backlog past ``BACKLOG_MAX`` is dropped (and counted).
        """
        loop = self._start()
        # What does not fit now is dropped now: the room a call finds is the
        # room it has, however soon its first messages go out.
        with self._lock:
            room = max(0, BACKLOG_MAX - self._backlog)
            warn = self._count_dropped(max(0, len(events) - room))
        if warn:
            logger.warning("channel layer backlog full: %d events dropped so far", self.dropped)
        events = events[:room]
        for start in range(0, len(events), EVENT_BATCH_MAX):
            self._gather(loop, layer, events[start : start + EVENT_BATCH_MAX])

    def _gather(self, loop: asyncio.AbstractEventLoop, layer: Any, events: list[dict[str, Any]]) -> None:
        dropped, new = 0, None
        with self._lock:
            take = max(0, min(len(events), BACKLOG_MAX - self._backlog))
            dropped, events = len(events) - take, events[:take]
            if events:
                n = len(events)
                self._backlog += n
                full = self._batch
                if full is not None and full.layer is layer and len(full.events) + n <= EVENT_BATCH_MAX:
                    full.events.extend(events)
                    self._pending[full.done] += n
                else:
                    new = self._batch = _EventBatch(layer, list(events))
                    self._pending[new.done] = n
                    # Scheduled under the lock, so batches go in line in the
                    # order they were opened, whichever thread opened them.
                    if full is not None:  # closed early (full, or another layer's): in line now
                        loop.call_soon_threadsafe(self._queue_batch, full)
                    loop.call_soon_threadsafe(loop.call_later, EVENT_FLUSH_DELAY, self._queue_batch, new)
            warn = self._count_dropped(dropped)
        if new is not None:
            new.done.add_done_callback(self._settled)
        if warn:
            logger.warning("channel layer backlog full: %d events dropped so far", self.dropped)

    def _queue_batch(self, batch: _EventBatch) -> None:
        """On the loop: close *batch* to new events and put it in line (once)."""
        with self._lock:
            if self._batch is batch:
                self._batch = None
            if batch.queued:
                return
            batch.queued = True
        assert self._queue is not None
        self._queue.put_nowait((batch.layer, EVENTS_GROUP, events_message(batch.events), batch.done))

    def _count_dropped(self, n: int) -> bool:
        """Under ``_lock``: count *n* dropped events; whether to say so (logged after the lock)."""
        before, self.dropped = self.dropped, self.dropped + n
        return n > 0 and (before == 0 or before // 1000 != self.dropped // 1000)

    def _settled(self, done: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._backlog -= self._pending.pop(done, 0)
        if not done.cancelled() and done.exception() is not None:
            logger.warning("could not reach the channel layer", exc_info=done.exception())

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Send the events gathered so far at once, and wait (up to *timeout*) until every one has gone."""
        if self._pending:
            with self._lock:
                batch, pending = self._batch, list(self._pending)
                if batch is not None and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._queue_batch, batch)  # now, not after the delay
            concurrent.futures.wait(pending, timeout=timeout)


def _after_fork(ref: weakref.ref[Any]) -> None:
    """In a forked child: let the object (a ``LayerSender``, a ``_Line``) start afresh."""
    obj = ref()
    if obj is not None:
        obj._forked()


sender = LayerSender()


class DirectPublisher:
    """PUBLISH a message the way ``RedisPubSubChannelLayer.group_send`` does, synchronously.

    Same channel name (``<prefix>__group__<group>``) and the layer's own
    serializer, so a node's layer receives it like any group message. Only
    for a pub/sub layer on one Redis server given by a plain URL (no shards,
    no Sentinel, no options in the URL's query): ``for_layer`` returns None
    for anything else. A message takes at most ``SEND_TIMEOUT`` to connect
    (twice when the kept connection is found closed) and as long again to be
    written.

    A PUBLISH is written to the socket and its reply read later, when the
    next one goes out (``_Line``): the caller does not wait a round trip for
    a count of receivers it has no use for. The wake leaves as soon as
    before; a kept connection found closed is opened afresh and the message
    written on the new one, and a failure there (or of a first connect)
    raises to the caller.
    """

    OPTIONS = ("socket_connect_timeout", "password", "username")

    def __init__(self, layer: Any, url: str, options: dict[str, Any], prefix: str) -> None:
        import redis

        self._layer = weakref.ref(layer)  # the process's cache must not keep a layer alive
        self.prefix = prefix
        options = {k: v for k, v in options.items() if k in self.OPTIONS}
        options["socket_connect_timeout"] = min(options.get("socket_connect_timeout") or SEND_TIMEOUT, SEND_TIMEOUT)
        self.redis = redis.Redis.from_url(url, socket_timeout=SEND_TIMEOUT, **options)
        self._line = _Line(self.redis.connection_pool)

    @classmethod
    def for_layer(cls, layer: Any) -> DirectPublisher | None:
        from channels_redis.pubsub import RedisPubSubChannelLayer

        if type(layer) is not RedisPubSubChannelLayer:
            return None
        kwargs = getattr(layer, "_kwargs", {})
        hosts = kwargs.get("hosts")
        if not (isinstance(hosts, list) and len(hosts) == 1 and isinstance(hosts[0], dict) and "address" in hosts[0]):
            return None
        host = dict(hosts[0])
        url = host.pop("address")
        if set(host) - {"socket_timeout", *cls.OPTIONS} or not isinstance(url, str) or "?" in url:
            return None  # options this publisher would not honour: leave it to the layer
        try:
            return cls(layer, url, host, kwargs.get("prefix", "asgi"))
        except Exception:  # a URL redis-py refuses: the layer's own path reports it when used
            logger.warning("cannot publish straight to %s; wakes go through the layer", url, exc_info=True)
            return None

    def publish(self, group: str, message: dict[str, Any]) -> None:
        layer = self._layer()
        if layer is None:
            raise RuntimeError("the channel layer is gone")
        self._line.send(publish_command(f"{self.prefix}__group__{group}", layer.serialize(message)))

    def close(self) -> None:
        self._line.close()
        self.redis.close()


class _Line:
    """One connection to Redis whose replies are read when the next command goes
    out (at most ``OWED`` left unread). Thread-safe; a forked child starts
    afresh with a connection of its own (``_forked``).

    redis-py makes the connection (address, credentials, database, TLS);
    the commands and their replies then go over its socket directly, made
    non-blocking: a PUBLISH is written as bytes built here, and the replies
    that are in are read without waiting and only counted. That is safe
    because the connection speaks RESP2 with nothing pushed unasked (no
    RESP3, no maintenance notifications), and each reply to a PUBLISH is
    one line (an integer, or an error): one line in is one reply less owed.
    """

    OWED = 64
    CLOSE_WAIT = 0.5  # seconds ``close`` waits for the replies still owed

    def __init__(self, pool: Any) -> None:
        # Made outside the pool's count: the pool refuses to make more than
        # its max_connections, and this one is never handed back to it.
        options = dict(pool.connection_kwargs)
        options["protocol"] = 2
        if "maint_notifications_config" in options:  # (redis-py 7+: pushed frames of several lines)
            from redis.maint_notifications import MaintNotificationsConfig

            options["maint_notifications_config"] = MaintNotificationsConfig(enabled=False)
            options.pop("maint_notifications_pool_handler", None)
        self._make = functools.partial(pool.connection_class, **options)
        self._forked()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=functools.partial(_after_fork, weakref.ref(self)))

    def _forked(self) -> None:
        # The child has none of the parent's threads: the lock may have been
        # held at fork, and the socket is the parent's.
        self.lock = threading.Lock()
        self.conn: Any = None
        self.owed = 0  # replies not read yet

    def send(self, command: bytes) -> None:
        """Write *command* (one RESP command whose reply is one line)."""
        import redis

        with self.lock:
            if self.conn is None:
                self.conn = self._make()
            conn = self.conn
            kept = conn.is_connected
            try:
                self._write(conn, command)
            except BaseException as exc:
                self._drop(conn)
                if not (kept and isinstance(exc, (redis.RedisError, OSError))):
                    raise  # (a fresh connection that failed gets no second wait)
                # A message written on the kept one before it failed may be lost
                # (best effort, as a wake Redis refuses).
                logger.warning("Redis closed the publishing connection (%s); reconnecting", exc)
                try:
                    self._write(conn, command)  # connects again; a failure raises
                except BaseException:
                    self._drop(conn)  # (nothing half-written stays on it)
                    raise

    def _drop(self, conn: Any) -> None:
        conn.disconnect()
        self.owed = 0

    def _write(self, conn: Any, command: bytes) -> None:
        if not conn.is_connected:
            conn.connect()
        sock = conn._sock
        if sock.gettimeout() != 0:
            sock.settimeout(0)  # reads never wait from here on; waits are _wait_for's
        deadline = None if conn.socket_timeout is None else time.monotonic() + conn.socket_timeout
        # Read the replies that are in, and look for a close: a message
        # written on a connection the server closed would vanish.
        self._in(sock)
        while self.owed >= self.OWED:
            self._wait_in(sock, deadline)
        view = memoryview(command)
        while view:
            try:
                view = view[sock.send(view) :]
            except (BlockingIOError, ssl.SSLWantWriteError):
                _wait_for(sock, _WRITABLE, deadline)
            except ssl.SSLWantReadError:  # (TLS renegotiation: it must read first)
                _wait_for(sock, _READABLE, deadline)
        self.owed += 1

    def _in(self, sock: Any) -> None:
        """Take in everything that has arrived, without waiting: every reply,
        and a close behind them (which raises)."""
        while self._take(sock):
            pass

    def _take(self, sock: Any) -> bool:
        """Read what is there (without waiting); whether anything was."""
        try:
            chunk = sock.recv(_CHUNK)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        self._count(chunk)
        return True

    def _wait_in(self, sock: Any, deadline: float | None) -> None:
        """Wait until *deadline* (``time.monotonic()``) for replies, and take them in."""
        if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            _wait_for(sock, _READABLE, deadline)
        self._take(sock)

    def _count(self, chunk: bytes) -> None:
        import redis

        if not chunk:
            raise redis.ConnectionError("Redis closed the connection")
        replies = chunk.count(b"\n")
        if replies > self.owed:
            raise redis.ConnectionError("Redis sent what nobody asked for")
        self.owed -= replies
        if b"-" in chunk:  # an error reply: the connection is fine; that message was refused
            for line in chunk.split(b"\r\n"):
                if line.startswith(b"-"):
                    logger.warning("Redis refused a message published earlier: %s", line[1:].decode(errors="replace"))

    def settle(self, timeout: float) -> bool:
        """Wait up to *timeout* seconds until every reply owed is in; whether it is."""
        with self.lock:
            return self._settle(timeout)

    def _settle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.owed and self.conn is not None and self.conn.is_connected:
            try:
                self._wait_in(self.conn._sock, deadline)
            except TimeoutError:
                return False
        return not self.owed

    def close(self) -> None:
        """Read the replies still owed (up to ``CLOSE_WAIT``), then disconnect:
        closing with replies unread could reset the connection under the last
        messages."""
        if not self.lock.acquire(timeout=self.CLOSE_WAIT):
            return  # another thread is publishing (at exit, a daemon thread): leave it
        try:
            if self.conn is None:
                return
            try:
                self._settle(self.CLOSE_WAIT)
            except Exception:
                logger.debug("replies not read before closing", exc_info=True)
            finally:
                self._drop(self.conn)
                self.conn = None
        finally:
            self.lock.release()


_CHUNK = 65536


_READABLE, _WRITABLE = (select.POLLIN, select.POLLOUT) if hasattr(select, "poll") else (1, 4)


def _wait_for(sock: Any, event: int, deadline: float | None) -> None:
    """Wait until *sock* is ready for *event* (``_READABLE`` or ``_WRITABLE``),
    or raise ``TimeoutError`` at *deadline* (``time.monotonic()``; None: never)."""
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    if hasattr(select, "poll"):
        poll = select.poll()
        poll.register(sock, event)
        ready = bool(poll.poll(None if timeout is None else math.ceil(timeout * 1000)))
    else:  # (Windows)
        readable, writable, _ = select.select(
            [sock] if event == _READABLE else [], [sock] if event == _WRITABLE else [], [], timeout
        )
        ready = bool(readable or writable)
    if not ready:
        raise TimeoutError("Redis did not answer in time")


def publish_command(channel: str, message: bytes) -> bytes:
    """Redis's PUBLISH of *message* to *channel*, as the bytes sent (RESP)."""
    name = channel.encode()
    return b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(name), name, len(message), message)


_publishers: weakref.WeakKeyDictionary[Any, DirectPublisher | None] = weakref.WeakKeyDictionary()
_publishers_lock = threading.Lock()


def direct_publisher(layer: Any) -> DirectPublisher | None:
    """The process's one publisher for *layer* (None when it cannot have one).

    Kept as long as the layer lives; its connections close with it.
    """
    with _publishers_lock:
        if layer in _publishers:
            return _publishers[layer]
        publisher = _publishers[layer] = DirectPublisher.for_layer(layer)
    if publisher is not None:
        weakref.finalize(layer, publisher.close)
    return publisher


class ChannelLayerHooks(InlineHooks):
    def __init__(self) -> None:
        self._layer: Any = None
        self._direct: DirectPublisher | None = None

    @property
    def layer(self) -> Any:
        if self._layer is None:
            from channels.layers import InMemoryChannelLayer, get_channel_layer

            layer = get_channel_layer()
            self._layer = False if layer is None or isinstance(layer, InMemoryChannelLayer) else layer
            if self._layer:
                self._direct = direct_publisher(self._layer)
        return self._layer

    @property
    def wants_events(self) -> bool:  # type: ignore[override]
        # EVENTS=0 stops publishing from every process, not only from nodes.
        return conveyor_settings.EVENTS and bool(self.layer)

    @property
    def reaches_other_processes(self) -> bool:  # type: ignore[override]
        return bool(self.layer)

    def _send(self, group: str, message: dict[str, Any]) -> None:
        if not self.layer:
            return
        try:
            if self._direct is not None:
                self._direct.publish(group, message)
            else:
                sender.send(self.layer, group, message)
        except Exception:  # best effort: a sweep recovers a lost message
            logger.warning("could not reach the channel layer for %s", group, exc_info=True)

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        for queue in queues:
            self._send(queue_group(queue), wake_message(queue, at))

    def publish(self, events: Sequence[Event]) -> None:
        if not self.layer:
            return
        try:
            sender.send_events(self.layer, as_dicts(events))
        except Exception:  # best effort, as for wakes: the change they describe is committed
            logger.warning("could not hand events to the channel layer", exc_info=True)

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        self._send(CONTROL_GROUP, {"type": "conveyor.cancel", "refs": [list(r) for r in refs]})


def fire_group_message(queue: str, group: str, task_type: str) -> dict[str, Any]:
    return {"type": "conveyor.fire_group", "queue": queue, "group": group, "task_type": task_type}


def send_to_queue(queue: str, message: dict[str, Any]) -> None:
    """Send *message* to every node's dispatcher of *queue* (from sync code)."""
    hooks = ChannelLayerHooks()
    hooks._send(queue_group(queue), message)
