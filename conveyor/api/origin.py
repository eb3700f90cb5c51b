"""Browser-facing WebSockets accept only their own site's pages.

A browser sends the page's ``Origin`` with every WebSocket handshake and
sends the site's cookies with it: without a check, any page a staff user
visits could open ``/ws/events`` with their session and read the stream, or
open ``/ws/worker`` on a tokenless node and take its tasks. The rule is
Django's CSRF origin rule: an ``Origin`` must name the host the request was
sent to (its ``Host`` header), or be listed in ``CSRF_TRUSTED_ORIGINS``. A
handshake without an ``Origin`` (a worker, the CLI, a server) is not from a
browser page and passes; its token or session is checked as before.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def origin_allowed(origin: str, host: str | None) -> bool:
    """Whether a handshake from *origin* may reach a server addressed as *host*."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null" (a sandboxed or file: page) and anything odd
    if host is not None and parts.netloc.lower() == host.lower():
        return True
    trusted = {o.rstrip("/").lower() for o in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])}
    return f"{parts.scheme}://{parts.netloc}".lower() in trusted


class SameOriginWebSockets:
    """ASGI middleware: deny a WebSocket handshake whose ``Origin`` is another site's."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.denier = WebsocketDenier.as_asgi()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            origin = _header(scope, b"origin")
            if origin is not None and not origin_allowed(origin, _header(scope, b"host")):
                return await self.denier(scope, receive, send)
        return await self.app(scope, receive, send)
