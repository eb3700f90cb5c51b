"""Clients generated from our conveyor.v1 protos (connectrpc's), for tests.

``Rpc`` calls a live node at a URL with the generated sync clients, or the
node's ASGI application in this process (pyqwest's ASGI transport, the
generated async clients), in either codec and either protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.protocol import ProtocolType
from pyqwest import Client, HTTPVersion
from pyqwest.testing import ASGITransport

from conveyor.v1 import service_connect as rpc

CODECS = {"json": google_protobuf_json_codec, "proto": google_protobuf_binary_codec}
SERVICES = ("TaskService", "AdminService", "WebhookService")


class Rpc:
    def __init__(self, url: str | None = None, *, codec: str = "json", token: str | None = None,
                 protocol: ProtocolType = ProtocolType.CONNECT) -> None:  # fmt: skip
        self.url = url
        self.codec = CODECS[codec]()
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.protocol = protocol

    def __call__(self, service: str, method: str, request: Any) -> Any:
        """``rpc("TaskService", "enqueue", EnqueueRequest(...))``: the response message (or ConnectError)."""
        if self.url is not None:
            with self._client(service, sync=True, address=self.url) as client:
                return getattr(client, method)(request, headers=self.headers)
        return async_to_sync(self._in_process)(service, method, request)

    async def _in_process(self, service: str, method: str, request: Any) -> Any:
        from conveyor_site.asgi import application

        transport = ASGITransport(application, http_version=HTTPVersion.HTTP1)
        async with self._client(service, sync=False, address="http://testserver", http_client=Client(transport)) as c:
            return await getattr(c, method)(request, headers=self.headers)

    def stream(self, method: str, request: Any, timeout_ms: int = 30_000) -> Iterator[Any]:
        """A server stream of AdminService from a live node."""
        assert self.url is not None
        with self._client("AdminService", sync=True, address=self.url, timeout_ms=timeout_ms) as client:
            yield from getattr(client, method)(request, headers=self.headers)

    def _client(self, service: str, *, sync: bool, address: str, **options: Any) -> Any:
        cls = getattr(rpc, f"{service}Client{'Sync' if sync else ''}")
        return cls(address, codec=self.codec, protocol=self.protocol, **options)


def post(path: str, body: bytes | str, content_type: str = "application/json", **headers: str) -> httpx.Response:
    """A raw HTTP POST to the node's ASGI application (what curl sends)."""
    from conveyor_site.asgi import application

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.post(path, content=body, headers={"content-type": content_type, **headers})

    return async_to_sync(send)()
