"""The synchronous client's HTTP: the standard library's ``http.client``, kept alive.

A producer enqueuing one task at a time spends most of its own CPU in the
HTTP library: httpx costs about three times what ``http.client`` does per
request. ``Client`` therefore sends its calls over plain ``http.client``
connections that it keeps open and reuses, and keeps httpx for what this
module does not do (``serves``): proxies (any the standard library's
``urllib.request.getproxies()`` finds, as httpx asks it), credentials in
the URL, a timeout given as ``httpx.Timeout``, and ``Client.request`` with
httpx's keyword arguments. TLS uses the context httpx would build, so both
paths trust the same certificates.

Network failures are raised as httpx's exceptions (``httpx.ConnectError``,
``httpx.WriteError``, ``httpx.ReadTimeout``, ...). A connection that sat
idle is checked before it is reused: if the server closed it meanwhile it
is dropped and a new one opened, so a request is never sent on a
connection known to be dead. A request that fails after it was sent is not
sent again (the server may have acted on it), as with httpx; a server that
answers before it has read the whole request (a 413 for a body too large)
and closes is heard: its answer is returned, as httpx returns it.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import urllib.parse
import urllib.request
from typing import NoReturn

import httpx

KEEP_IDLE = 20  # connections kept open between calls (httpx keeps 20 too)
# What a URL path may hold as it is (RFC 3986 pchar and "/"); the rest is percent-encoded.
PATH_SAFE = "/%:@!$&'()*+,;=-._~"


def serves(base_url: str, timeout: object) -> bool:
    """Whether this module can carry calls to *base_url*: an http or https URL
    without credentials, a timeout in seconds (or None), and no proxy to go
    through (httpx honours proxies; this module does not)."""
    url = urllib.parse.urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname or url.username is not None:
        return False
    if not (timeout is None or (isinstance(timeout, (int, float)) and not isinstance(timeout, bool))):
        return False
    proxies = urllib.request.getproxies()  # the environment, or the system's settings (macOS, Windows)
    return not any(proxies.get(scheme) for scheme in ("http", "https", "all"))


class Transport:
    """Keep-alive HTTP/1.1 connections to one server, shared by threads."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float | None) -> None:
        url = urllib.parse.urlsplit(base_url)
        self.base_url = base_url
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._prefix = urllib.parse.quote(url.path.rstrip("/"), safe=PATH_SAFE)
        self._timeout = timeout
        self._headers = {**headers, "Accept": "application/json"}
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._context: ssl.SSLContext | None = None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; return the status and the whole body."""
        conn = self._connection(method, path)
        try:
            conn.request(method, self._prefix + path, body, self._headers if body is None else self._json_headers)
        except OSError as exc:
            # A server may answer, and close, before it has read it all.
            early = None if isinstance(exc, TimeoutError) else _early_answer(conn, method)
            conn.close()
            if early is None:
                self._raise(exc, method, path, stage="write")
            return early
        except BaseException:
            conn.close()
            raise
        try:
            response = conn.getresponse()
            content = response.read()
        except BaseException as exc:
            conn.close()
            self._raise(exc, method, path, stage="read")
        if response.will_close:
            conn.close()
        else:
            self._put_back(conn)
        return response.status, content

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connection(self, method: str, path: str) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the client is closed")
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if _alive(conn):
                return conn
            conn.close()  # the server closed it while it sat idle (or sent what it should not)
        if self._https:
            if self._context is None:
                self._context = httpx.create_ssl_context()
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            conn.connect()
        except BaseException as exc:
            conn.close()
            self._raise(exc, method, path, stage="connect")
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _put_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < KEEP_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _raise(self, exc: BaseException, method: str, path: str, *, stage: str) -> NoReturn:
        """Raise *exc*, met while at *stage* (connect, write or read), as the
        httpx exception httpx would have raised (others as they are)."""
        if isinstance(exc, TimeoutError):
            kind: type[httpx.TransportError] = TIMEOUTS[stage]
        elif isinstance(exc, http.client.HTTPException):
            kind = httpx.RemoteProtocolError
        elif isinstance(exc, OSError):
            kind = ERRORS[stage]
        else:
            raise exc
        raise kind(str(exc) or type(exc).__name__, request=httpx.Request(method, self.base_url + path)) from exc


TIMEOUTS: dict[str, type[httpx.TransportError]] = {
    "connect": httpx.ConnectTimeout,
    "write": httpx.WriteTimeout,
    "read": httpx.ReadTimeout,
}
ERRORS: dict[str, type[httpx.TransportError]] = {
    "connect": httpx.ConnectError,
    "write": httpx.WriteError,
    "read": httpx.ReadError,
}


def _early_answer(conn: http.client.HTTPConnection, method: str) -> tuple[int, bytes] | None:
    """The answer a server sent before the request was written whole, if one came."""
    if conn.sock is None:
        return None
    response = http.client.HTTPResponse(conn.sock, method=method)
    try:
        response.begin()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        response.close()


def _alive(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can carry a request: nothing to read on it
    (a readable idle socket is one the server closed, or one it wrote to
    unasked)."""
    sock = conn.sock
    if sock is None:
        return False
    if not hasattr(select, "poll"):  # Windows
        return not select.select([sock], [], [], 0)[0]
    poller = select.poll()  # (select.select refuses descriptors from 1024 on)
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)
