"""The node's WebSocket routes, under the prefix ``conveyor.urls`` is mounted at.

A host project that runs its own ASGI application routes
``websocket_urlpatterns`` in it (``conveyor_websockets()`` does the nesting).
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.urls import path

from conveyor.api.events import EventsConsumer
from conveyor.api.origin import SameOriginWebSockets
from conveyor.dispatch.consumer import WorkerConsumer
from conveyor.mount import prefix

websocket_urlpatterns = [
    path("ws/worker", WorkerConsumer.as_asgi()),
    # Session auth (dashboard staff) or a bearer token.
    path("ws/events", AuthMiddlewareStack(EventsConsumer.as_asgi())),
]


def conveyor_websockets() -> Any:
    """A router for Conveyor's WebSockets under the HTTP prefix, so a worker
    given the API's base URL (``http://host/conveyor``) finds ``ws/worker`` there;
    a handshake from another site's page is denied (conveyor.api.origin)."""
    mounted = prefix().strip("/")
    if not mounted:
        return SameOriginWebSockets(URLRouter(websocket_urlpatterns))
    return SameOriginWebSockets(URLRouter([path(mounted + "/", URLRouter(websocket_urlpatterns))]))
