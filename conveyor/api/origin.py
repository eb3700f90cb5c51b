"""Browser-facing WebSockets and every API change accept only their own site's pages.

A browser sends the page's ``Origin`` with every WebSocket handshake and
sends the site's cookies with it: without a check, any page a staff user
visits could open ``/ws/events`` with their session and read the stream, or
open ``/ws/worker`` on a tokenless node and take its tasks. The rule is
Django's CSRF origin rule: an ``Origin`` must name the host the request was
sent to (its ``Host`` header), or be listed in ``CSRF_TRUSTED_ORIGINS``. A
handshake without an ``Origin`` (a worker, the CLI, a server) is not from a
browser page and passes; its token or session is checked as before.

The same rule guards every request that changes something on the REST API
and the Connect services (``cross_site_refusal``): on a node without tokens
(``--dev``, ``CONVEYOR_ALLOW_UNAUTHENTICATED=1``) nothing else would stop a
page a developer visits from pausing a queue or registering a webhook. A
browser sends ``Origin`` with every POST, PUT, PATCH and DELETE. The body
types a page may send without a CORS preflight (a form's, ``text/plain``)
are refused too, ``Origin`` or not: no endpoint takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
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


# The body types of a "simple" cross-origin request: a page sends them with no preflight.
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: an HTTP status and a message naming the fix."""

    status: int
    message: str


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def cross_site_refusal(
    method: str, origin: str | None, host: str | None, content_type: str | None, accepted: str = "application/json"
) -> Refusal | None:
    """Refuse a change sent by another site's page, or in a body type only a page would send."""
    if method.upper() in SAFE_METHODS:
        return None
    if origin is not None and not origin_allowed(origin, host):
        return Refusal(
            403,
            f"cross-site request refused: Origin {origin} is not this site's "
            "(list it in CSRF_TRUSTED_ORIGINS to allow it)",
        )
    media = media_type(content_type)
    if media in FORM_TYPES:
        return Refusal(415, f"{media} is not accepted: send {accepted}")
    return None


def scope_refusal(scope: dict[str, Any], accepted: str = "application/json") -> Refusal | None:
    """``cross_site_refusal`` for an ASGI HTTP request."""
    method, content_type = scope.get("method", "GET"), _header(scope, b"content-type")
    return cross_site_refusal(method, _header(scope, b"origin"), _header(scope, b"host"), content_type, accepted)


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
