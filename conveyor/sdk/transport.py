"""The synchronous client's HTTP: the standard library's ``http.client``, kept alive.

A producer enqueuing one task at a time spends most of its own CPU in the
HTTP library: httpx costs about three times what ``http.client`` does per
request. ``Client`` therefore sends its calls over plain ``http.client``
connections that it keeps open and reuses, and keeps httpx for what this
module does not do: proxies (any ``*_proxy`` variable in the environment
sends every call through httpx, which honours them) and ``Client.request``
with httpx's keyword arguments. TLS uses the context httpx would build, so
both paths trust the same certificates.

What a caller sees is what httpx gives: network failures are raised as
httpx's exceptions (``httpx.ConnectError``, ``httpx.ReadTimeout``, ...).
A connection that sat idle is checked before it is reused: if the server
closed it meanwhile it is dropped and a new one opened, so a request is
never sent on a connection known to be dead. A request that fails after it
was sent is not sent again (the server may have acted on it), as with
httpx.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import ssl
import threading
import urllib.parse
from typing import NoReturn

import httpx

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
KEEP_IDLE = 20  # connections kept open between calls (httpx keeps 20 too)


def serves(base_url: str) -> bool:
    """Whether this module can carry calls to *base_url*: http or https, and
    no proxy asked for in the environment (httpx honours those; this module does not)."""
    url = urllib.parse.urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return False
    return not any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


class Transport:
    """Keep-alive HTTP/1.1 connections to one server, shared by threads."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        url = urllib.parse.urlsplit(base_url)
        self.base_url = base_url
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._timeout = timeout
        self._headers = {**headers, "Accept": "application/json"}
        self._context: ssl.SSLContext | None = None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; return the status and the whole body."""
        headers = self._headers
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
        conn = self._connection(method, path)
        try:
            conn.request(method, self._prefix + path, body, headers)
            response = conn.getresponse()
            content = response.read()
        except BaseException as exc:
            conn.close()
            self._raise(exc, method, path, sent=True)
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
            self._raise(exc, method, path, sent=False)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _put_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < KEEP_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _raise(self, exc: BaseException, method: str, path: str, *, sent: bool) -> NoReturn:
        """Raise *exc* as the httpx exception httpx would have raised (others as they are)."""
        if isinstance(exc, TimeoutError):
            kind: type[httpx.TransportError] = httpx.ReadTimeout if sent else httpx.ConnectTimeout
        elif isinstance(exc, http.client.HTTPException):
            kind = httpx.RemoteProtocolError
        elif isinstance(exc, OSError):
            kind = httpx.ReadError if sent else httpx.ConnectError
        else:
            raise exc
        raise kind(str(exc) or type(exc).__name__, request=httpx.Request(method, self.base_url + path)) from exc


def _alive(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can carry a request: nothing to read on it
    (a readable idle socket is one the server closed, or one it wrote to
    unasked)."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
