"""The node's WebSocket protocol: uvicorn's sans-I/O one, with every handshake answered.

uvicorn hands a WebSocket upgrade to websockets' sans-I/O parser, which
refuses a request line or header over 8 KiB and more than 128 headers; when
it does, uvicorn's protocol writes nothing and keeps the connection open, so
the client waits for an answer until it gives up. ``AnsweredHandshake`` is
given to uvicorn as its ``ws`` protocol: it reads the upgrade with
websockets' public parser first, answers one it refuses as an HTTP request
is answered (431 for a header too large or too many headers, else 400, with
the JSON error shape) and closes; every other connection is uvicorn's
``websockets-sansio`` protocol, unchanged.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.datastructures import Headers
from websockets.exceptions import SecurityError
from websockets.http11 import Response
from websockets.server import ServerProtocol


class AnsweredHandshake(asyncio.Protocol):
    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], _loop: Any = None) -> None:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

        self.inner = WebSocketsSansIOProtocol(config, server_state, app_state, _loop)
        self.transport: asyncio.Transport | None = None
        self.started = False  # the inner protocol has the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # The inner protocol sees the connection only once its handshake parses.
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.started:
            refusal = handshake_refusal(data)
            if refusal is not None:
                assert self.transport is not None
                self.transport.write(refusal)
                self.transport.close()
                return
            self.started = True
            self.inner.connection_made(self.transport)  # type: ignore[arg-type]
        self.inner.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.started:
            self.inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.started else None

    def pause_writing(self) -> None:
        if self.started:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.started:
            self.inner.resume_writing()


def handshake_refusal(request: bytes) -> bytes | None:
    """The HTTP answer to an upgrade request websockets cannot parse, or None when it can.

    *request* is the whole request: uvicorn's HTTP protocol read it and hands it on at once.
    """
    parser = ServerProtocol()
    parser.receive_data(request)
    error = parser.handshake_exc
    if error is None:
        return None
    too_large = next((e for e in causes(error) if isinstance(e, SecurityError)), None)
    if too_large is not None:
        status, reason, text = 431, "Request Header Fields Too Large", f"headers too large ({too_large})"
    else:
        status, reason, text = 400, "Bad Request", "; ".join(str(e) for e in causes(error))
    # The JSON error shape of an HTTP request refused whole (as a body too large is).
    body = json.dumps({"error": "invalid_argument", "message": f"the WebSocket handshake: {text}", "field": ""})
    headers = Headers(
        [("Content-Type", "application/json"), ("Content-Length", str(len(body.encode()))), ("Connection", "close")]
    )
    return Response(status, reason, headers, body.encode()).serialize()


def causes(error: BaseException) -> list[BaseException]:
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain
