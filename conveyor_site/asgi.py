"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conveyor_site.settings")
django_asgi = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from conveyor.api.fastpath import EnqueueFastPath  # noqa: E402
from conveyor_site.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # One-by-one enqueue skips Django's per-request overhead; the
        # operator UI's assets are served by the node itself.
        "http": EnqueueFastPath(ASGIStaticFilesHandler(django_asgi)),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
