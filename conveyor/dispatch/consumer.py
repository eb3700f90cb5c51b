"""The worker WebSocket (/ws/worker): one consumer and gateway per session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer

from conveyor import __version__, cluster
from conveyor.conf import conveyor_settings
from conveyor.dispatch import frames as f
from conveyor.dispatch.gateway import Gateway
from conveyor.dispatch.node import Node, current_node
from conveyor.exceptions import ConveyorError
from conveyor.ids import new_ulid
from conveyor.models import Task
from conveyor.sdk import protocol as p
from conveyor.tokens import CONSUME, ApiToken, authenticate, require_queues, require_scope

logger = logging.getLogger("conveyor.gateway")

HELLO_TIMEOUT = 10.0
CLOSE_CODES = {"unauthenticated": p.CLOSE_UNAUTHENTICATED, "permission_denied": p.CLOSE_FORBIDDEN}
MIN_SDK_VERSION = "0.1.0"
MAX_ERROR_TEXT = 500  # characters of an error frame's message (and its log line)


def authorization(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return value.decode("latin1").strip()
    return ""


class WebSocketGateway(Gateway):
    """A gateway whose worker is at the other end of a WebSocket."""

    def __init__(self, consumer: WorkerConsumer, node: Node, key: str, hello: dict[str, Any]) -> None:
        super().__init__(
            node,
            key,
            hello["queues"],
            hello["concurrency"],
            hello["batch_types"],
            prefetch=hello["prefetch"],
            labels=hello["labels"],
        )
        self.consumer = consumer
        self.sdk_version = hello["sdk_version"]

    def push_tasks(self, queue: str, tasks: list[Task]) -> None:
        self.consumer.queue_frames([f.dispatch_frame(t, queue, self._marked(t.id)) for t in tasks])
        for t in tasks:
            t.payload = b""  # sent; keep memory flat while it runs

    def push_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        self.consumer.queue_frames([f.batch_dispatch_frame(queue, group, tasks, self._marked(tasks[0].id))])
        for t in tasks:
            t.payload = b""

    def _marked(self, task_id: str) -> bool:
        """Whether a dispatch says it was started at delivery: only on a
        session with a window (without one, every dispatch is started)."""
        record = self.inflight.get(task_id)
        return bool(self.prefetch) and record is not None and record.started

    def flush(self) -> None:
        self.consumer.flush()

    def push_cancel(self, task_id: str, lease_id: str, reason: str) -> None:
        self.consumer.queue_frames([{"type": p.CANCEL, "task_id": task_id, "lease_id": lease_id, "reason": reason}])

    async def shutdown(self, grace: float) -> None:
        """The node is stopping: no new tasks; those in flight have *grace*
        seconds to report; the rest go back; the worker is asked to reconnect
        elsewhere."""
        self.node.unregister_gateway(self)
        await self.wait_resolved(grace)
        await self.release_all()
        await self.consumer.forget_session()
        await self.consumer.close(code=p.CLOSE_SERVICE_RESTART)


class WorkerConsumer(AsyncWebsocketConsumer):
    # The gateway hears from its node, not from the channel layer: no
    # per-session layer channel (and no Redis round trips per session).
    channel_layer_alias = "conveyor.no-layer"
    node: Node | None
    gateway: WebSocketGateway | None

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes old DB connections before every message through its
        # one shared sync thread; this consumer never touches the ORM itself,
        # so skip that hop on the hot path.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.node = current_node()
        self.gateway = None
        self._outbox: list[dict[str, Any]] = []
        self._flush_scheduled = False
        self._timers: list[asyncio.TimerHandle] = []
        self._ping: asyncio.TimerHandle | None = None
        self._ended = False
        self._session_row: asyncio.Task[None] | None = None  # the cluster view's row, being written
        await self.accept()
        if self.node is None or self.node.stopping:
            await self._refuse(p.CLOSE_SERVICE_RESTART, "unavailable", "this node is not serving workers")
            return
        try:
            self.token: ApiToken | None = authenticate(authorization(self.scope))
            require_scope(self.token, CONSUME)
        except ConveyorError as exc:
            await self._refuse(CLOSE_CODES[exc.code], exc.code, exc.message)
            return
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(HELLO_TIMEOUT, self._hello_timeout))

    async def _refuse(self, code: int, error: str, message: str) -> None:
        self._ended = True
        await self.send(text_data=p.encode_frames([f.error_frame(error, message)]))
        await self.close(code=code)

    def _hello_timeout(self) -> None:
        if self.gateway is None and not self._ended:
            self.node.spawn(self._refuse(p.CLOSE_HELLO_TIMEOUT, "hello_timeout", "no hello frame within 10s"))  # type: ignore[union-attr]

    # -- outgoing ----------------------------------------------------------------------

    def queue_frames(self, frames: list[dict[str, Any]]) -> None:
        """Send soon, together with whatever else is sent in this loop turn."""
        self._outbox.extend(frames)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        frames, self._outbox = self._outbox, []
        if frames and not self._ended:
            self.node.spawn(self.send(text_data=p.encode_frames(frames)), eager=True)  # type: ignore[union-attr]

    def flush(self) -> None:
        """Send what is queued now, not at the end of this loop turn."""
        if self._flush_scheduled:
            self._flush()

    # -- incoming ----------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self._ended:
            return
        if text_data is None:
            await self._protocol_error("frames must be sent as text messages")
            return
        try:
            for frame in p.decode_frames(text_data):
                await self._handle(frame)
        except f.FrameError as exc:
            await self._protocol_error(str(exc))
        except ValueError as exc:
            await self._protocol_error(str(exc))

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if self.gateway is None:
            if kind != p.HELLO:
                raise f.FrameError(f"the first frame must be hello, got {kind!r}")
            await self._hello(f.check_hello(frame))
            return
        gateway = self.gateway
        if kind == p.RESULT:
            task_id, outcome, error, result = f.check_result(frame)
            gateway.settle(task_id, outcome, error, result, lease_id=f.lease_of(frame), traceback=f.traceback_of(frame))
        elif kind == p.BATCH_RESULT:
            lease_id, results = f.check_batch_result(frame)
            gateway.settle_group(lease_id, results)
        elif kind == p.HEARTBEAT:
            ids = f.check_task_ids(frame)
            if ids:
                self.node.spawn(gateway.heartbeat(ids))  # type: ignore[union-attr]
        elif kind == p.STARTED:
            gateway.mark_started(f.check_task_ids(frame))
        elif kind == p.PROGRESS:
            task_id, percent, message = f.check_progress(frame)
            record = gateway.inflight.get(task_id)
            if record is not None:
                node = self.node
                node.spawn(self._progress(task_id, record.task.lease_id or "", percent, message))  # type: ignore[union-attr]
        elif kind == p.CREDIT:
            n, queue = f.check_credit(frame)
            gateway.add_credit(n, queue)
        elif kind == p.HELLO:
            raise f.FrameError("hello was already received")
        else:
            raise f.FrameError(f"unknown frame type {kind!r}")

    async def _progress(self, task_id: str, lease_id: str, percent: float, message: str) -> None:
        try:
            await self.node.db.run(self.node.broker.set_progress, task_id, lease_id, percent, message)  # type: ignore[union-attr]
        except Exception as exc:
            logger.debug("progress for %s dropped: %s", task_id, exc)

    async def _hello(self, hello: dict[str, Any]) -> None:
        node = self.node
        assert node is not None
        if hello["protocol"] != p.PROTOCOL_VERSION:
            await self._refuse(
                p.CLOSE_VERSION,
                "version",
                f"protocol {hello['protocol']} is not supported (this server speaks {p.PROTOCOL_VERSION})",
            )
            return
        if hello["min_server_version"] and p.version_tuple(__version__) < p.version_tuple(hello["min_server_version"]):
            await self._refuse(
                p.CLOSE_VERSION,
                "version",
                f"server {__version__} is older than the worker's minimum {hello['min_server_version']}",
            )
            return
        try:
            require_queues(self.token, hello["queues"], "serve")
        except ConveyorError as exc:
            await self._refuse(p.CLOSE_FORBIDDEN, exc.code, exc.message)
            return
        if hello["sdk_version"] and p.version_tuple(hello["sdk_version"]) < p.version_tuple(MIN_SDK_VERSION):
            await self._refuse(
                p.CLOSE_VERSION,
                "version",
                f"SDK {hello['sdk_version']} is older than the server's minimum {MIN_SDK_VERSION}",
            )
            return
        session_id = new_ulid(datetime.now(UTC))
        ttl = conveyor_settings.LEASE_TTL
        self.queue_frames(
            [
                {
                    "type": p.WELCOME,
                    "protocol": p.PROTOCOL_VERSION,
                    "session_id": session_id,
                    "lease_ttl": ttl,
                    "heartbeat_interval": ttl / 3,
                    "server_version": __version__,
                    "min_sdk_version": MIN_SDK_VERSION,
                    "node": node.id,
                    "prefetch": hello["prefetch"],
                }
            ]
        )
        self.gateway = WebSocketGateway(self, node, session_id, hello)
        node.register_gateway(self.gateway)
        client = self.scope.get("client") or ("", 0)
        self._session_row = node.spawn(
            node.db.run(
                cluster.add_session,
                node.id,
                session_id,
                datetime.now(UTC),
                queues=hello["queues"],
                concurrency=hello["concurrency"],
                labels=hello["labels"],
                sdk_version=hello["sdk_version"],
                remote=f"{client[0]}:{client[1]}",
            )
        )
        self._schedule_ping(ttl / 3)

    def _schedule_ping(self, interval: float) -> None:
        def ping() -> None:
            if not self._ended:
                self.queue_frames([{"type": p.PING, "time": datetime.now(UTC).timestamp()}])
                self._schedule_ping(interval)

        # One pending ping timer per session (replaced, not accumulated).
        self._ping = asyncio.get_running_loop().call_later(interval, ping)

    async def _protocol_error(self, message: str) -> None:
        """Tell the worker what was wrong, give its tasks back, close."""
        if len(message) > MAX_ERROR_TEXT:
            # A message may quote the frame (an unknown type of 64 MiB): not all of it, to the log or back.
            message = f"{message[:MAX_ERROR_TEXT]}... ({len(message)} characters)"
        logger.info("closing worker session: %s", message)
        gateway = self.gateway
        if gateway is not None:
            self.node.unregister_gateway(gateway)  # type: ignore[union-attr]
            await gateway.release_all()
            await self.forget_session()
        await self._refuse(p.CLOSE_PROTOCOL_ERROR, "invalid_frame", message)

    # -- endings -----------------------------------------------------------------------

    async def disconnect(self, code: int) -> None:
        self._ended = True
        for timer in self._timers:
            timer.cancel()
        if self._ping is not None:
            self._ping.cancel()
        gateway, node = self.gateway, self.node
        if gateway is None or node is None:
            return
        node.unregister_gateway(gateway)
        if gateway.inflight:
            if code in (p.CLOSE_NORMAL, p.CLOSE_GOING_AWAY) or node.stopping:
                await gateway.release_all()
            else:
                # The socket dropped with work in flight (a killed worker):
                # the crash is charged to the task it names, if any.
                await gateway.crashed()
        await self.forget_session()

    async def forget_session(self) -> None:
        """Take the session out of the cluster view (once).

        The row's insert runs on a database thread of its own: it is waited
        for first, or a delete that overtook it would leave a ghost listed
        for as long as the node lives. A server-initiated close calls this
        before it sends the close frame, so a worker that saw the close
        never finds its session still listed.
        """
        row, self._session_row = self._session_row, None
        if row is None or self.gateway is None or self.node is None:
            return
        with contextlib.suppress(Exception):  # a failed insert left nothing to delete
            await row
        await self.node.db.run(cluster.remove_session, self.gateway.key)
