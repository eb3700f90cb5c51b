from __future__ import annotations

from django.urls import path

from conveyor.dispatch.consumer import WorkerConsumer

websocket_urlpatterns = [
    path("ws/worker", WorkerConsumer.as_asgi()),
]
