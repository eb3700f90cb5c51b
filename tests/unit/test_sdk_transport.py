"""conveyor.sdk.transport: the sync client's kept-alive http.client connections,
against a real HTTP server on a loopback socket that behaves as each test needs."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from conveyor.sdk import APIError, Client
from conveyor.sdk.transport import Transport, serves

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
    transport = Transport(server.url, {"User-Agent": "t"}, 5)
    for _ in range(5):
        assert transport.request("POST", "/api/v1/tasks", b"{}") == (201, TASK)
    transport.close()
    assert server.connections == 1
    assert len(server.requests) == 5


def test_the_request_carries_the_body_the_headers_and_the_base_path(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url + "/prefix/", token="s3cret") as client:
        assert client._transport is not None  # the http.client path
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
    transport = Transport(server.url, {}, 5)
    assert transport.request("POST", "/one", b"{}")[0] == 201
    (idle,) = transport._idle
    server.drop_all()  # as a restarted server, or one ending idle keep-alive connections, does
    assert select.select([idle.sock], [], [], 5)[0]  # the close has reached the client
    assert transport.request("POST", "/two", b"{}")[0] == 201
    assert _paths(server) == [(1, "/one"), (2, "/two")]  # each sent once, the second on a new connection
    transport.close()


def test_a_refused_connection_is_httpxs_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    transport = Transport(f"http://127.0.0.1:{port}", {}, 5)
    with pytest.raises(httpx.ConnectError):
        transport.request("GET", "/api/v1/tasks/x")


def test_no_answer_within_the_timeout_is_httpxs_read_timeout(server_with) -> None:
    server = server_with(lambda n, request: b"")  # reads the request, never answers
    transport = Transport(server.url, {}, 0.3)
    with pytest.raises(httpx.ReadTimeout):
        transport.request("POST", "/api/v1/tasks", b"{}")
    assert len(server.requests) == 1


def test_a_connection_closed_without_an_answer_is_a_protocol_error_and_not_sent_again(server_with) -> None:
    server = server_with(lambda n, request: None)  # reads the request, closes
    transport = Transport(server.url, {}, 5)
    with pytest.raises(httpx.RemoteProtocolError):
        transport.request("POST", "/api/v1/tasks", b"{}")
    assert len(server.requests) == 1  # it may have been acted on: not sent twice
    assert transport._idle == []


def test_an_answer_that_says_close_closes_the_connection(server_with) -> None:
    closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
    server = server_with(lambda n, request: closing)
    transport = Transport(server.url, {}, 5)
    assert transport.request("GET", "/a")[0] == 201
    assert transport._idle == []
    assert transport.request("GET", "/b")[0] == 201
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


def test_task_ids_are_escaped_in_the_path(server_with) -> None:
    body = b'{"id":"a b/c","queue":"default","type":"t","state":"pending"}'
    server = server_with(lambda n, request: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    with Client(server.url) as client:
        assert client.get_task("a b/c").id == "a b/c"
    assert _paths(server) == [(1, "/api/v1/tasks/a%20b%2Fc")]


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
        assert len(client._transport._idle) == server.connections


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "https_proxy", "ALL_PROXY"])
def test_a_proxy_in_the_environment_sends_calls_through_httpx(monkeypatch, server_with, variable) -> None:
    # The proxy is a loopback server that answers as the API would: a proxied
    # request names the whole URL on its request line.
    proxy = server_with(lambda n, request: OK)
    monkeypatch.setenv(variable, proxy.url)
    monkeypatch.setenv("NO_PROXY", "")
    assert not serves("http://127.0.0.1:9", 30)
    target = "http://127.0.0.1:9" if "https" not in variable else None
    if target is None:  # httpx uses HTTPS_PROXY for https:// only: check the switch, not the route
        with Client("https://127.0.0.1:9") as client:
            assert client._transport is None
        return
    with Client(target) as client:
        assert client._transport is None
        assert client.enqueue("t", {}).id == "t1"
    assert proxy.requests[0][1].startswith(b"POST http://127.0.0.1:9/api/v1/tasks HTTP/1.1")


def test_only_http_and_https_urls_with_a_timeout_in_seconds_are_served_without_httpx() -> None:
    assert serves("http://127.0.0.1:8080", 30)
    assert serves("https://conveyor.internal", 2.5)
    assert serves("http://127.0.0.1:8080", None)
    assert not serves("unix:///tmp/sock", 30)
    assert not serves("127.0.0.1:8080", 30)
    assert not serves("http://user:pw@127.0.0.1:8080", 30)
    assert not serves("http://127.0.0.1:8080", httpx.Timeout(5))


def test_credentials_in_the_url_go_through_httpx_as_basic_auth(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url.replace("http://", "http://user:pw@")) as client:
        assert client._transport is None
        client.get_task("t1")
    assert b"Authorization: Basic dXNlcjpwdw==" in server.requests[0][1]


def test_an_httpx_timeout_goes_through_httpx(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url, timeout=httpx.Timeout(5)) as client:
        assert client._transport is None
        assert client.enqueue("t", {}).id == "t1"


def test_a_closed_client_refuses_every_call(server_with, monkeypatch) -> None:
    server = server_with(lambda n, request: OK)
    for proxied in (False, True):
        if proxied:
            monkeypatch.setenv("HTTP_PROXY", server.url)
        client = Client(server.url)
        assert (client._transport is None) is proxied
        client.close()
        with pytest.raises(RuntimeError, match="closed"):
            client.enqueue("t", {})
        with pytest.raises(RuntimeError, match="closed"):
            client.request("GET", "/api/v1/queues")
    assert server.requests == []


def test_a_base_path_is_percent_encoded_as_httpx_does(server_with) -> None:
    server = server_with(lambda n, request: OK)
    with Client(server.url + "/my api/über") as client:
        client.get_task("t1")
        client.request("GET", "/api/v1/tasks/t1")
    assert _paths(server) == [(1, "/my%20api/%C3%BCber/api/v1/tasks/t1")] * 1 + [
        (2, "/my%20api/%C3%BCber/api/v1/tasks/t1")
    ]


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


def test_a_request_the_server_does_not_read_is_a_write_timeout(server_with) -> None:
    server = server_with(lambda n, request: OK)
    server.stall = True  # reads the headers, then nothing
    with Client(server.url, timeout=0.5) as client, pytest.raises(httpx.WriteTimeout):
        client.enqueue_batch([{"type": "t", "json": "x" * 1000}] * 20000)


def test_keep_alive_holds_with_descriptors_past_1024(server_with) -> None:
    server = server_with(lambda n, request: OK)
    padding = []
    try:
        while not padding or padding[-1] < 1100:
            padding.append(os.open(os.devnull, os.O_RDONLY))
        transport = Transport(server.url, {}, 5)
        for _ in range(5):
            assert transport.request("GET", "/a")[0] == 201
        assert transport._idle[0].sock.fileno() >= 1024
        transport.close()
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
    monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # trusted as httpx trusts: its context
    with Client(server.url) as client:
        assert client._transport is not None
        for _ in range(3):
            assert client.enqueue("t", {}).id == "t1"
    assert (server.connections, len(server.requests)) == (1, 3)


def test_https_with_a_certificate_nobody_vouches_for_is_refused(server_with, certificate) -> None:
    server = _tls_server(server_with, certificate)
    with Client(server.url) as client, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        client.enqueue("t", {})
    assert server.requests == []


def _paths(server: Server) -> list[tuple[int, str]]:
    return [(n, request.split(b" ")[1].decode()) for n, request in server.requests]
