"""Run a node: uvicorn serving the ASGI app, plus the node's services on its loop.

The node runs no ASGI lifespan (Channels' router has none): it starts its
services itself once the server listens, on the server's loop, and stops
in its own order on SIGTERM/SIGINT: hand every in-flight task back and
close worker sessions with 1012 (``Node.drain``), then stop the server (no
new connections; every request already read is answered, with
``Connection: close``; idle keep-alive connections are closed), then stop
the services. Exit 0.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from conveyor.conf import conveyor_settings

logger = logging.getLogger("conveyor.node")

MAX_MESSAGE = 64 * 1024 * 1024  # a worker's batch result may be large
# Longer than the idle timeout of common load balancers (60 s), so an idle
# producer's connection is closed by its side, not raced by the node's.
KEEP_ALIVE = 75
BACKLOG = 2048
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def serve(host: str, port: int, *, dev: bool, ready: Callable[[str], None] | None = None) -> int:
    """Serve until a signal; return the exit status (1: could not listen)."""
    import uvicorn

    try:
        sock = listen(host, port)
    except OSError as exc:
        logger.error("could not listen on %s:%s: %s", host, port, exc)
        return 1
    config = server_config()
    server = uvicorn.Server(config)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        return runner.run(run(server, sock, host, dev, ready))


def listen(host: str, port: int) -> socket.socket:
    """The node's listening socket, bound here so a port in use is a clear exit 1."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Nagle's algorithm off: an answer written in two pieces (head, body)
        # must not wait ~40 ms for the client's delayed ACK. Accepted sockets
        # inherit it on Linux; asyncio's transports also set it, but only on
        # sockets whose protocol says TCP (hence IPPROTO_TCP above).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


class ClientMistakes(logging.Filter):
    """uvicorn logs a client's text frame that is not UTF-8 as an ERROR with a
    traceback (then closes with 1007, as it should): any client could fill
    the log with them. It is the client's mistake, a one-line INFO."""

    MESSAGES = ("Invalid UTF-8 sequence received from client.",)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in self.MESSAGES:
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def server_config() -> Any:
    import uvicorn
    from channels.routing import get_default_application

    from conveyor.dispatch.handshake import AnsweredHandshake

    uvicorn_errors = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, ClientMistakes) for f in uvicorn_errors.filters):
        uvicorn_errors.addFilter(ClientMistakes())

    return uvicorn.Config(
        get_default_application(),  # settings.ASGI_APPLICATION: the site's, or a host project's
        # asyncio's own loop: with uvloop, a webhook gateway whose endpoint
        # came back after refused connections kept failing (docs/decisions.md).
        loop="asyncio",
        lifespan="off",  # the node starts and stops its services itself (see run)
        log_config=None,  # Django's LOGGING stays in charge
        access_log=False,  # CONVEYOR_ACCESS_LOG is the node's own (conveyor.logs.AccessLog)
        server_header=False,
        proxy_headers=False,  # behind a proxy, Django's SECURE_PROXY_SSL_HEADER says what to trust
        ws=AnsweredHandshake,  # websockets-sansio, answering a handshake it cannot parse (handshake.py)
        ws_max_size=MAX_MESSAGE,
        ws_per_message_deflate=False,  # frames are small JSON (Daphne negotiated no compression either)
        timeout_keep_alive=KEEP_ALIVE,
        timeout_graceful_shutdown=conveyor_settings.SHUTDOWN_TIMEOUT,
    )


async def run(server: Any, sock: socket.socket, host: str, dev: bool, ready: Callable[[str], None] | None) -> int:
    from conveyor.dispatch.node import Node

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signal_names: list[str] = []

    def on_signal(signum: int, frame: Any) -> None:
        signal_names.append(signal.Signals(signum).name)
        loop.call_soon_threadsafe(stop.set)

    # uvicorn sets aside the handlers it finds while it serves and puts them
    # back after; its own would stop the server at once, before the drain,
    # so the node's go over them once it listens.
    catch_signals(on_signal)
    port = sock.getsockname()[1]
    node = Node(host=host, port=port, dev=dev)
    install_services(node)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():  # stopped (or failed) before it listened
            serving.result()
            return 0
        await asyncio.sleep(0.01)
    catch_signals(on_signal)
    try:
        await node.start()
    except BaseException:
        server.should_exit = True
        await serving
        raise
    # Everything loaded so far (Django, the app, the services) lives as long
    # as the process: move it out of the collector's sight, so a full
    # collection no longer walks it (a ~70 ms pause on every gen-2 pass
    # otherwise, visible as a latency spike).
    gc.collect()
    gc.freeze()
    if ready is not None:
        ready(f"http://{host}:{port}")
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    await shutdown(node, server, serving, signal_names[0] if signal_names else "stop")
    return 0


async def shutdown(node: Any, server: Any, serving: asyncio.Future[None], signame: str) -> None:
    timeout = conveyor_settings.SHUTDOWN_TIMEOUT
    logger.info("%s: draining (up to %.0fs)", signame, timeout)
    try:
        await asyncio.wait_for(node.drain(timeout), timeout)
    except Exception:
        logger.warning("drain did not finish cleanly", exc_info=True)
    server.should_exit = True  # close the listener, answer what was read, close the connections
    await serving
    await node.stop()


def catch_signals(handler: Callable[[int, Any], None]) -> None:
    for sig in SIGNALS:
        signal.signal(sig, handler)


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
