"""The SDK clients' HTTP (urllib3, kept-alive connections) against a real HTTP
server on a loopback socket that behaves as each test needs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import urllib3

from conveyor.sdk import APIError, AsyncClient, Client, ConnectError, ConveyorError, TransportError

TASK = b'{"id":"t1","queue":"default","type":"t","state":"pending"}'
OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(TASK), TASK)


class Server:
    """One thread per connection; *answer* gets (connection number, request) and returns
    the bytes to send back, b"" to send nothing, or None to close the connection."""

    def __init__(self, answer: Callable[[int, bytes], bytes | None], tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.listening = socket.create_server(("127.0.0.1", 0))
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.listening.getsockname()[1]}"
        self.connections = 0
        self.open: list[socket.socket] = []
        self.early: bytes | None = None
        self.stall = False
        self.requests: list[tuple[int, bytes]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listening.accept()
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused the certificate
                conn.close()
                return
        with conn:
            buffered = b""
            while True:
                while b"\r\n\r\n" not in buffered:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buffered += data
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                if self.early is not None:  # answer now, then reset: the body is not read
                    conn.sendall(self.early)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if self.stall:
                    time.sleep(5)
                    return
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(buffered) < length:
                    buffered += conn.recv(65536)
                request, buffered = head + b"\r\n\r\n" + buffered[:length], buffered[length:]
                self.requests.append((number, request))
                reply = self.answer(number, request)
                if reply is None:
                    return
                conn.sendall(reply)

    def drop_all(self) -> None:
        """Close every connection from the server's side."""
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listening.close()
        self.drop_all()


@pytest.fixture
def server_with() -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(answer: Callable[[int, bytes], bytes | None], tls: ssl.SSLContext | None = None) -> Server:
        servers.append(Server(answer, tls))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "ssl_cert_file", "ssl_cert_dir"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_requests_share_one_kept_alive_connection(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url) as client:
        for _ in range(5):
            assert client.enqueue("t", {}).id == "t1"
    assert server.connections == 1
    assert len(server.requests) == 5


def test_the_request_carries_the_body_the_headers_and_the_base_path(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url + "/prefix/", token="s3cret") as client:
        client.enqueue("email:send", {"to": "ada", "note": "ü"}, priority=3)
    request = server.requests[0][1]
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /prefix/api/v1/tasks HTTP/1.1"
    assert "Authorization: Bearer s3cret" in lines
    assert "Content-Type: application/json" in lines
    assert "User-Agent: conveyor-python" in lines
    assert json.loads(body) == {
        "type": "email:send",
        "queue": "default",
        "json": {"to": "ada", "note": "ü"},
        "priority": 3,
    }


def test_a_connection_the_server_closed_while_idle_is_replaced_and_the_request_sent_once(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url) as client:
        client.enqueue("t", {})
        server.drop_all()  # as a restarted server, or one ending idle keep-alive connections, does
        time.sleep(0.2)  # the close reaches the client (loopback: at once)
        client.get_task("t1")
    assert _paths(server) == [
        (1, "/api/v1/tasks"),
        (2, "/api/v1/tasks/t1"),
    ]  # each once, the second on a new connection


def test_a_refused_connection_is_a_connect_error_with_urllib3s_cause() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}") as client, pytest.raises(ConnectError) as refused:
        client.get_task("x")
    assert isinstance(refused.value, TransportError) and isinstance(refused.value, ConveyorError)
    assert isinstance(refused.value.__cause__, urllib3.exceptions.NewConnectionError)
    assert f"GET http://127.0.0.1:{port}/api/v1/tasks/x" in str(refused.value)


@pytest.mark.parametrize("call", ["enqueue", "get_task"])
def test_no_answer_within_the_timeout_is_a_transport_error_and_sent_once(server_with, call) -> None:
    server = server_with(lambda n, request: b"")  # reads the request, never answers
    with Client(server.url, timeout=0.3) as client, pytest.raises(TransportError) as failed:
        client.enqueue("t", {}) if call == "enqueue" else client.get_task("t1")
    assert not isinstance(failed.value, ConnectError)  # it was sent: it may be stored
    assert isinstance(failed.value.__cause__, urllib3.exceptions.ReadTimeoutError)
    assert len(server.requests) == 1


def test_a_timeout_may_be_urllib3s(server_with) -> None:
    server = server_with(lambda n, request: b"")
    started = time.monotonic()
    with Client(server.url, timeout=urllib3.Timeout(connect=5, read=0.2)) as client, pytest.raises(TransportError):
        client.get_task("t1")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("call", ["enqueue", "get_task"])
def test_a_connection_closed_without_an_answer_is_a_transport_error_and_not_sent_again(server_with, call) -> None:
    server = server_with(lambda n, request: None if n == 1 else OK)  # the first connection closes unanswered
    with Client(server.url) as client:
        send = (lambda: client.enqueue("t", {})) if call == "enqueue" else (lambda: client.get_task("t1"))
        with pytest.raises(TransportError) as failed:
            send()
        assert not isinstance(failed.value, ConnectError)
        assert len(server.requests) == 1  # it may have been acted on: not sent twice
        assert send().id == "t1"  # the next call opens a new connection
    assert [n for n, _ in server.requests] == [1, 2]


def test_an_answer_that_says_close_closes_the_connection(server_with) -> None:
    closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    server = server_with(lambda n, request: closing)
    with Client(server.url) as client:
        client.get_task("a")
        client.get_task("b")
    assert server.connections == 2


def test_a_refusal_that_is_not_json_is_an_api_error_with_the_text(server_with) -> None:
    text = b"upstream is down"
    server = server_with(
        lambda n, request: b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text)
    )
    with Client(server.url) as client, pytest.raises(APIError) as refused:
        client.enqueue("t", {})
    assert refused.value.status == 502
    assert refused.value.message == "upstream is down"


def test_a_redirect_is_an_answer_not_followed(server_with) -> None:
    moved = b'{"moved":true}'
    server = server_with(
        lambda n, request: (
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: %d\r\n\r\n%s"
            % (len(moved), moved)
        )
    )
    with Client(server.url) as client:
        assert client.request("POST", "/api/v1/tasks", json={}) == {"moved": True}
    assert _paths(server) == [(1, "/api/v1/tasks")]


def test_task_ids_are_escaped_in_the_path(server_with) -> None:
    body = b'{"id":"a b/c","queue":"default","type":"t","state":"pending"}'
    server = server_with(lambda n, request: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with Client(server.url) as client:
        assert client.get_task("a b/c").id == "a b/c"
    assert _paths(server) == [(1, "/api/v1/tasks/a%20b%2Fc")]


def test_request_sends_json_and_params(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url) as client:
        assert client.request("POST", "/api/v1/tasks/x/cancel", json={"why": "ü"})["id"] == "t1"
        client.request("GET", "/api/v1/tasks?limit=5", params={"queue": ["a b", "c"], "state": "archived"})
    (_, first), (_, second) = server.requests
    assert first.startswith(b"POST /api/v1/tasks/x/cancel HTTP/1.1")
    assert json.loads(first.partition(b"\r\n\r\n")[2]) == {"why": "ü"}
    assert second.startswith(b"GET /api/v1/tasks?limit=5&queue=a+b&queue=c&state=archived HTTP/1.1")


def test_one_client_shared_by_threads(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url) as client:
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                for _ in range(25):
                    assert client.enqueue("t", {}).id == "t1"
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=produce) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(server.requests) == 200
        assert 1 <= server.connections <= 8  # a connection per thread at most, reused


def test_the_async_client_runs_calls_side_by_side_without_holding_the_loop(server_with) -> None:
    def slow(n: int, request: bytes) -> bytes:
        time.sleep(0.5)
        return OK

    server = server_with(slow)

    async def run() -> float:
        async with AsyncClient(server.url) as client:
            started = time.monotonic()
            ticks = asyncio.create_task(_ticks(0.5))
            tasks = await asyncio.gather(client.enqueue("t", {}), client.enqueue("t", {}))
            assert [t.id for t in tasks] == ["t1", "t1"]
            assert await ticks >= 5  # the loop ran on while both waited
            return time.monotonic() - started

    assert asyncio.run(run()) < 0.9  # side by side, not one after the other
    assert server.connections == 2


def test_the_async_clients_network_failures_are_transport_errors() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]

    async def run() -> None:
        async with AsyncClient(f"http://127.0.0.1:{port}") as client:
            with pytest.raises(ConnectError):
                await client.enqueue("t", {})

    asyncio.run(run())


async def _ticks(seconds: float) -> int:
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(0.05)
        count += 1
    return count


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_in_the_environment_carries_http_calls(monkeypatch, server_with, variable) -> None:
    # The proxy is a loopback server that answers as the API would: a proxied
    # request names the whole URL on its request line.
    proxy = server_with(lambda n, request: OK)
    monkeypatch.setenv(variable, proxy.url.replace("http://", "http://us%40er:p%3Aw@"))
    monkeypatch.setenv("NO_PROXY", "")
    with Client("http://127.0.0.1:9/base") as client:
        assert client.enqueue("t", {}).id == "t1"
    request = proxy.requests[0][1]
    assert request.startswith(b"POST http://127.0.0.1:9/base/api/v1/tasks HTTP/1.1")
    assert b"\r\nProxy-Authorization: Basic " + base64.b64encode(b"us@er:p:w") + b"\r\n" in request


def test_an_https_call_through_a_proxy_is_tunnelled_and_a_refused_tunnel_is_a_connect_error(
    monkeypatch, server_with
) -> None:
    proxy = server_with(lambda n, request: b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "")
    with Client("https://127.0.0.1:9") as client, pytest.raises(ConnectError):
        client.enqueue("t", {})
    assert proxy.requests[0][1].startswith(b"CONNECT 127.0.0.1:9 HTTP/1.1")


def test_no_proxy_names_hosts_reached_directly(monkeypatch, server_with) -> None:
    server = server_with(lambda n, request: OK)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "example.com,127.0.0.1")
    with Client(server.url) as client:
        assert client.enqueue("t", {}).id == "t1"
    assert _paths(server) == [(1, "/api/v1/tasks")]


@pytest.mark.parametrize("url", ["unix:///tmp/sock", "localhost:8080", "http://", "ftp://127.0.0.1"])
def test_only_http_and_https_urls_make_a_client(url: str) -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        Client(url)


def test_credentials_in_the_url_are_sent_as_basic_auth(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url.replace("http://", "http://user:pw@")) as client:
        client.get_task("t1")
    request = server.requests[0][1]
    assert b"Authorization: Basic dXNlcjpwdw==" in request
    assert request.startswith(b"GET /api/v1/tasks/t1 HTTP/1.1")


def test_a_network_error_does_not_name_the_urls_credentials() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with Client(f"http://user:s3cret@127.0.0.1:{port}/base") as client, pytest.raises(ConnectError) as refused:
        client.get_task("x")
    assert str(refused.value).startswith(f"GET http://127.0.0.1:{port}/base/api/v1/tasks/x: ")
    assert "s3cret" not in str(refused.value)


def test_a_closed_client_refuses_every_call(server_with, monkeypatch) -> None:
    server = server_with(lambda n, request: OK)
    for proxied in (False, True):
        if proxied:
            monkeypatch.setenv("HTTP_PROXY", server.url)
        client = Client(server.url)
        client.close()
        with pytest.raises(RuntimeError, match="closed"):
            client.enqueue("t", {})
        with pytest.raises(RuntimeError, match="closed"):
            client.request("GET", "/api/v1/queues")
    assert server.requests == []


def test_a_base_path_is_percent_encoded(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url + "/my api/über") as client:
        client.get_task("t1")
        client.request("GET", "/api/v1/tasks/t1")
    assert _paths(server) == [(1, "/my%20api/%C3%BCber/api/v1/tasks/t1")] * 2


def test_an_answer_sent_before_the_request_was_read_whole_is_returned(server_with) -> None:
    # A proxy refusing a body too large answers after the headers and resets.
    refusal = b'{"error":"invalid_argument","message":"request body too large"}'

    def answer(number: int, request: bytes) -> bytes | None:
        return None  # (never reached: the body never arrives whole)

    server = server_with(answer)
    server.early = (
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(refusal), refusal)
    )
    with Client(server.url) as client, pytest.raises(APIError) as refused:
        client.enqueue_batch([{"type": "t", "json": "x" * 1000}] * 20000)
    assert (refused.value.status, refused.value.message) == (413, "request body too large")


def test_a_request_the_server_does_not_read_is_a_transport_error(server_with) -> None:
    server = server_with(lambda n, request: OK)
    server.stall = True  # reads the headers, then nothing
    with Client(server.url, timeout=0.5) as client, pytest.raises(TransportError) as failed:
        client.enqueue_batch([{"type": "t", "json": "x" * 1000}] * 20000)
    assert not isinstance(failed.value, ConnectError)


def test_keep_alive_holds_with_descriptors_past_1024(server_with) -> None:
    server = server_with(lambda n, request: OK)
    padding = []
    try:
        while not padding or padding[-1] < 1100:
            padding.append(os.open(os.devnull, os.O_RDONLY))
        with Client(server.url) as client:  # its socket's descriptor is past 1100
            for _ in range(5):
                client.get_task("t1")
    finally:
        for fd in padding:
            os.close(fd)
    assert server.connections == 1


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=conveyor-test",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _tls_server(server_with, certificate) -> Server:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return server_with(lambda n, request: OK, tls=context)


def test_https_with_a_trusted_certificate_is_kept_alive(server_with, certificate, monkeypatch) -> None:
    server = _tls_server(server_with, certificate)
    monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # the system's trust store, as OpenSSL finds it
    with Client(server.url) as client:
        for _ in range(3):
            assert client.enqueue("t", {}).id == "t1"
    assert (server.connections, len(server.requests)) == (1, 3)


def test_https_with_a_certificate_nobody_vouches_for_is_refused(server_with, certificate) -> None:
    server = _tls_server(server_with, certificate)
    with Client(server.url) as client, pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        client.enqueue("t", {})
    assert server.requests == []


def _paths(server: Server) -> list[tuple[int, str]]:
    return [(n, request.split(b" ")[1].decode()) for n, request in server.requests]
