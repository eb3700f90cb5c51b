from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from django.urls import path

from conveyor.api.events import EventsConsumer
from conveyor.dispatch.consumer import WorkerConsumer

websocket_urlpatterns = [
    path("ws/worker", WorkerConsumer.as_asgi()),
    # Session auth (dashboard staff) or a bearer token.
    path("ws/events", AuthMiddlewareStack(EventsConsumer.as_asgi())),
]
