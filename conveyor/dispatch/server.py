"""Run a node: Daphne serving the ASGI app, plus the node's services on its loop.

Daphne runs no ASGI lifespan, so the node starts its services itself once
the reactor runs, and handles SIGTERM/SIGINT: stop listening, hand every
in-flight task back, flush acks, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from conveyor.conf import conveyor_settings

logger = logging.getLogger("conveyor.node")

MAX_MESSAGE = 64 * 1024 * 1024
CLOSE_GRACE = 0.3


def serve(host: str, port: int, *, dev: bool, ready: Callable[[str], None] | None = None) -> int:
    """Serve until a signal; return the exit status."""
    from channels.routing import get_default_application
    from daphne.server import Server  # installs the asyncio reactor: import first
    from twisted.internet import reactor

    from conveyor.dispatch.node import Node

    application = get_default_application()  # settings.ASGI_APPLICATION: the site's, or a host project's

    class NodeServer(Server):
        ports: list[Any] = []

        def listen_success(self, port: Any) -> None:
            # Twisted leaves Nagle on; a response written in two pieces then
            # waits ~40 ms for the client's delayed ACK. Accepted sockets
            # inherit TCP_NODELAY from the listening socket on Linux.
            with contextlib.suppress(OSError, AttributeError):
                port.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.ports.append(port)
            super().listen_success(port)

        def listen_error(self, failure: Any) -> None:
            state["status"] = 1
            super().listen_error(failure)

    send_at_once()
    requests_as_they_came()
    no_twisted_access_log()
    node = Node(host=host, port=port, dev=dev)
    install_services(node)
    server = NodeServer(
        application,
        endpoints=[f"tcp:port={port}:interface={host}"],
        signal_handlers=False,
        websocket_max_message_size=MAX_MESSAGE,
        websocket_max_frame_size=MAX_MESSAGE,
        application_close_timeout=5,
        verbosity=0,
    )
    state = {"status": 0, "stopping": False}

    async def boot() -> None:
        for _ in range(500):
            if server.ports or getattr(server, "abort_start", False):
                break
            await asyncio.sleep(0.01)
        if not server.ports:
            logger.error("could not listen on %s:%s", host, port)
            state["status"] = 1
            reactor.stop()
            return
        node.port = server.ports[0].getHost().port
        await node.start()
        # Everything loaded so far (Django, the app, the services) lives as
        # long as the process: move it out of the collector's sight, so a
        # full collection no longer walks it (a ~70 ms pause on every
        # gen-2 pass otherwise, visible as a latency spike).
        gc.collect()
        gc.freeze()
        url = f"http://{host}:{node.port}"
        if ready is not None:
            ready(url)

    async def shutdown(signame: str) -> None:
        if state["stopping"]:
            return
        state["stopping"] = True
        logger.info("%s: draining (up to %.0fs)", signame, conveyor_settings.SHUTDOWN_TIMEOUT)
        for listening in server.ports:
            listening.stopListening()
        try:
            await asyncio.wait_for(node.drain(conveyor_settings.SHUTDOWN_TIMEOUT), conveyor_settings.SHUTDOWN_TIMEOUT)
        except Exception:
            logger.warning("drain did not finish cleanly", exc_info=True)
        # Let the 1012 close frames reach the workers before the reactor stops.
        await asyncio.sleep(CLOSE_GRACE)
        await node.stop()
        reactor.stop()

    tasks: set[asyncio.Task[None]] = set()  # keep references until done

    def start(coro: Any) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def on_running() -> None:
        loop = asyncio.get_event_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda s=sig: start(shutdown(signal.Signals(s).name)))
        start(boot())

    reactor.callWhenRunning(on_running)
    server.run()
    return int(state["status"])


def install_services(node: Any) -> None:
    """Attach the background services every node runs: the sweepers (acting
    only while this node leads them) and the webhook manager."""
    from conveyor.dispatch.executor import single_writer
    from conveyor.sweepers import SWEEPERS
    from conveyor.sweepers.base import SweeperLoop
    from conveyor.webhooks.manager import WebhookManager

    shared = node.db.pool if single_writer() else None
    for sweeper in SWEEPERS.values():
        node.services.append(SweeperLoop(sweeper(node.broker, node), on_leadership=node.set_leader, pool=shared))
    node.services.append(WebhookManager(node))


def send_at_once() -> None:
    """Have the node's TCP connections send what they are given at once.

    Twisted queues every write and sends it on the reactor's next turn,
    once the socket has been reported writable: two more system calls
    (register the writer, then remove it) and one more loop turn for each
    WebSocket frame, which for a task pushed to a worker was ~0.1 ms of
    enqueue -> start at a steady rate. asyncio's transports, like this,
    try the socket first and queue only what it does not take. Data
    already queued keeps its place (nothing is sent ahead of it); a
    connection with a pull producer, being aborted or switched to TLS with
    ``startTLS`` takes the queued path. ``writeSequence`` (an HTTP
    response's status line and headers) is one such write of the pieces
    joined. Idempotent.
    """
    from twisted.internet import tcp

    queued = tcp.Server.write
    if getattr(queued, "sends_at_once", False):
        return

    def write(self: Any, data: bytes) -> None:
        if (
            type(data) is bytes
            and data
            and not self.TLS
            and self.connected
            and not self.disconnecting
            and not self._aborting
            and not self._writeDisconnected
            # A pull producer is asked for more by the queued path's doWrite. (A
            # push producer, like the HTTP channel every Daphne connection
            # carries, is only paused when the queue fills, and resumed as it empties.)
            and (self.producer is None or self.streamingProducer)
            and not getattr(self, "_sendmsgQueue", None)  # a Unix socket's file descriptors go first
            and not self._tempDataBuffer
            and self.offset == len(self.dataBuffer)
        ):
            try:
                sent = self.socket.send(data)
            except OSError:  # full, interrupted or broken: the queued write retries and reports
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        queued(self, data)

    def write_sequence(self: Any, iovec: Any) -> None:
        if all(type(piece) is bytes for piece in iovec):
            write(self, b"".join(iovec))
        else:  # (Twisted's refuses what is not bytes)
            queued_sequence(self, iovec)

    queued_sequence = tcp.Server.writeSequence
    write.sends_at_once = True  # type: ignore[attr-defined]
    tcp.Server.write = write  # type: ignore[method-assign]
    tcp.Server.writeSequence = write_sequence  # type: ignore[method-assign]


def requests_as_they_came() -> None:
    """Have Daphne's HTTP requests skip Twisted's parsing of form bodies.

    Twisted parses every POST whose Content-Type is a form into
    ``request.args``, and reads the Content-Type of every other POST (with
    the standard library's e-mail header parser) to find out; Daphne never
    looks at ``args`` and hands the body to the application as it came.
    Twisted's own switch for it (``parsePOSTFormSubmission``) is off in the
    requests Daphne makes from here on: ~7% of a node's time per one-task
    POST. Idempotent.
    """
    from daphne import http_protocol

    if getattr(http_protocol.HTTPFactory.buildProtocol, "as_they_came", False):
        return

    class Request(http_protocol.WebRequest):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["parsePOSTFormSubmission"] = False
            super().__init__(*args, **kwargs)

    build = http_protocol.HTTPFactory.buildProtocol

    def build_protocol(self: Any, addr: Any) -> Any:
        protocol = build(self, addr)
        if protocol is not None and protocol.requestFactory is http_protocol.WebRequest:
            protocol.requestFactory = Request
        return protocol

    build_protocol.as_they_came = True  # type: ignore[attr-defined]
    http_protocol.HTTPFactory.buildProtocol = build_protocol  # type: ignore[method-assign]


def no_twisted_access_log() -> None:
    """Have Daphne's HTTP factory skip Twisted's access log.

    Twisted formats a combined-log line for every request and hands it to
    its global log, which the node sends nowhere (Daphne, at the node's
    verbosity, points Twisted's log at an observer that drops everything).
    Daphne's own access log, the one its ``--access-log`` writes, is not
    this one and is unchanged. ~2% of a node's time per one-task POST.
    Idempotent.
    """
    from daphne import http_protocol

    def log(self: Any, request: Any) -> None:
        pass

    http_protocol.HTTPFactory.log = log  # type: ignore[method-assign]
