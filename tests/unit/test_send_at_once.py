"""The node's TCP connections send a write at once when nothing is queued (real sockets)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from twisted.internet import tcp
from twisted.internet.asyncioreactor import AsyncioSelectorReactor
from twisted.internet.protocol import Protocol

from conveyor.dispatch.server import send_at_once


@pytest.fixture
def connection() -> Iterator[tuple[tcp.Server, socket.socket]]:
    """A Twisted server connection on one end of a socket pair (a reactor of its own, not run)."""
    send_at_once()
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.setblocking(False)
    loop = asyncio.new_event_loop()
    reactor = AsyncioSelectorReactor(loop)
    conn = tcp.Server(ours, Protocol(), ("127.0.0.1", 1), tcp.Port(0, None, reactor=reactor), 1, reactor)
    try:
        yield conn, peer
    finally:
        peer.close()
        ours.close()
        loop.close()


def _received(peer: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_a_write_with_nothing_queued_is_on_the_wire_before_the_reactor_turns(
    connection: tuple[tcp.Server, socket.socket],
) -> None:
    conn, peer = connection
    conn.write(b'{"type":"dispatch"}')
    assert _received(peer) == b'{"type":"dispatch"}'  # the reactor never ran
    assert not conn._tempDataBuffer and conn.dataBuffer == b""


def test_what_the_socket_does_not_take_is_queued_in_order(connection: tuple[tcp.Server, socket.socket]) -> None:
    conn, peer = connection
    big = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than a socket buffer takes
    conn.write(big)
    sent_now = _received(peer)
    assert 0 < len(sent_now) < len(big)
    assert b"".join(conn._tempDataBuffer) == big[len(sent_now) :]  # the rest waits for the reactor
    conn.write(b"after")  # something is queued: this goes behind it, not ahead
    assert _received(peer) == b""
    assert conn._tempDataBuffer[-1] == b"after"


def test_installing_twice_keeps_one_wrapper() -> None:
    send_at_once()
    first, first_sequence = tcp.Server.write, tcp.Server.writeSequence
    send_at_once()
    assert tcp.Server.write is first and tcp.Server.writeSequence is first_sequence


def test_a_sequence_goes_at_once(connection: tuple[tcp.Server, socket.socket]) -> None:
    conn, peer = connection
    conn.writeSequence([b"HTTP/1.1 200 OK\r\n", b"Content-Length: 4\r\n", b"\r\n"])  # Twisted's HTTP headers
    conn.write(b"body")
    assert _received(peer) == b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody"
    assert conn._tempDataBuffer == []


def test_a_sequence_after_queued_data_waits_behind_it(connection: tuple[tcp.Server, socket.socket]) -> None:
    conn, peer = connection
    conn.registerProducer(_Pull(), False)  # the queued path
    conn.write(b"first ")
    conn.unregisterProducer()
    conn.writeSequence([b"second ", b"third"])
    assert _received(peer) == b""  # nothing overtook what was queued
    assert b"".join(conn._tempDataBuffer) == b"first second third"


def test_a_sequence_that_is_not_all_bytes_is_refused_as_twisted_refuses_it(
    connection: tuple[tcp.Server, socket.socket],
) -> None:
    conn, peer = connection
    with pytest.raises(TypeError):
        conn.writeSequence([b"ok", "text"])
    assert _received(peer) == b""


class _Pull:
    def resumeProducing(self) -> None: ...
    def pauseProducing(self) -> None: ...
    def stopProducing(self) -> None: ...


def test_an_aborted_connection_sends_nothing_more(connection: tuple[tcp.Server, socket.socket]) -> None:
    conn, peer = connection
    conn.abortConnection()
    conn.write(b"after the abort")
    assert _received(peer) == b""


def test_a_pull_producer_keeps_the_queued_path_and_a_push_producer_does_not(
    connection: tuple[tcp.Server, socket.socket],
) -> None:
    conn, peer = connection

    class Producer:
        def resumeProducing(self) -> None: ...
        def pauseProducing(self) -> None: ...
        def stopProducing(self) -> None: ...

    # Every Daphne connection carries a push producer (its HTTP channel):
    # it is paused only when the queue fills, so writes may go at once.
    conn.registerProducer(Producer(), True)
    conn.write(b"frame")
    assert _received(peer) == b"frame"
    conn.unregisterProducer()
    # A pull producer is asked for more from the queued path's doWrite.
    conn.registerProducer(Producer(), False)
    conn.write(b"chunk")
    assert _received(peer) == b""
    assert conn._tempDataBuffer == [b"chunk"]


def test_a_connection_carrying_twisteds_http_channel_sends_at_once(
    connection: tuple[tcp.Server, socket.socket],
) -> None:
    from twisted.web.http import HTTPChannel

    conn, peer = connection
    channel = HTTPChannel()  # what Daphne runs on every connection, WebSockets included
    conn.protocol = channel
    channel.makeConnection(conn)
    assert conn.producer is not None  # the channel registered itself (as a push producer)
    conn.write(b'{"type":"dispatch"}')
    assert _received(peer) == b'{"type":"dispatch"}'


def test_daphnes_requests_leave_form_bodies_to_the_application() -> None:
    # (tests/e2e/test_http_node.py: a form POST still reaches Django whole.)
    from daphne.http_protocol import HTTPFactory, WebRequest
    from daphne.server import Server

    from conveyor.dispatch.server import requests_as_they_came

    requests_as_they_came()
    requests_as_they_came()  # idempotent
    server = Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    server.connections = {}  # (what its run() sets up; it is not run here)
    factory = HTTPFactory(server)
    with socket.create_server(("127.0.0.1", 0)) as listening:
        peer = socket.create_connection(listening.getsockname())
        ours, address = listening.accept()
    loop = asyncio.new_event_loop()
    try:
        reactor = AsyncioSelectorReactor(loop)
        protocol = factory.buildProtocol(address)
        protocol.makeConnection(tcp.Server(ours, protocol, address, tcp.Port(0, factory, reactor=reactor), 1, reactor))
        request = protocol.requestFactory(protocol._channel)  # as Twisted's HTTP channel makes each request
        assert isinstance(request, WebRequest)  # Daphne's, as before
        assert request._parsePOSTFormSubmission is False  # Twisted's switch: no request.args from the body
    finally:
        peer.close()
        ours.close()
        loop.close()


def test_daphnes_factory_writes_no_twisted_access_log_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from daphne.http_protocol import HTTPFactory
    from daphne.server import Server
    from twisted.logger import globalLogPublisher

    from conveyor.dispatch.server import no_twisted_access_log

    monkeypatch.setattr(HTTPFactory, "log", HTTPFactory.log)  # put back after the test

    no_twisted_access_log()
    no_twisted_access_log()  # idempotent
    server = Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    server.connections = {}
    factory = HTTPFactory(server)
    factory.startFactory()  # Twisted opens its access log here: its global log, with no path given
    with socket.create_server(("127.0.0.1", 0)) as listening:
        peer = socket.create_connection(listening.getsockname())
        ours, address = listening.accept()
    loop = asyncio.new_event_loop()
    seen: list[dict] = []
    globalLogPublisher.addObserver(seen.append)
    try:
        reactor = AsyncioSelectorReactor(loop)
        protocol = factory.buildProtocol(address)
        protocol.makeConnection(tcp.Server(ours, protocol, address, tcp.Port(0, factory, reactor=reactor), 1, reactor))
        request = protocol.requestFactory(protocol._channel)
        request.method, request.uri, request.clientproto = b"POST", b"/api/v1/tasks", b"HTTP/1.1"
        request.code, request.sentLength = 201, 12
        factory.log(request)  # what Twisted calls as each request finishes
        assert [e for e in seen if "/api/v1/tasks" in str(e.get("log_io", "")) + str(e.get("log_format", ""))] == []
    finally:
        globalLogPublisher.removeObserver(seen.append)
        factory.stopFactory()
        peer.close()
        ours.close()
        loop.close()
