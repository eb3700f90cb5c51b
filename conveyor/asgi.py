"""The ASGI application a node serves: the project's Django over HTTP, Conveyor's WebSockets.

``conveyord`` serves ``settings.ASGI_APPLICATION``; a host project sets it
to ``"conveyor.asgi.application"``: every URL of the project's URLconf over
HTTP, Conveyor's enqueue fast path and Connect services in front, the project's static files,
and the worker and events WebSockets under the prefix ``conveyor.urls``
is mounted at. It is built on first use, after Django is set up.
"""

from __future__ import annotations

from typing import Any

_built: dict[str, Any] = {}


def build_application() -> Any:
    from django.core.asgi import get_asgi_application

    django_asgi = get_asgi_application()  # sets Django up when a server imports this first

    from channels.routing import ProtocolTypeRouter
    from django.apps import apps

    from conveyor.api.fastpath import EnqueueFastPath
    from conveyor.conf import conveyor_settings
    from conveyor.connect import mount
    from conveyor.logs import AccessLog
    from conveyor.mount import prefix
    from conveyor.routing import conveyor_websockets

    http = django_asgi
    if apps.is_installed("django.contrib.staticfiles"):
        http = static_files(http)  # the dashboard's assets, served by the node itself
    # One-by-one enqueue skips Django's per-request overhead.
    http = EnqueueFastPath(http, prefix=prefix())
    # The conveyor.v1 Connect services (/<prefix>conveyor.v1.*), on Connect's runtime.
    http = mount(http, prefix=prefix())
    if conveyor_settings.ACCESS_LOG:
        http = AccessLog(http)
    return ProtocolTypeRouter({"http": http, "websocket": conveyor_websockets()})


def static_files(app: Any) -> Any:
    """Django's static files handler, answering 404 for a path that leaves the static roots.

    Django's finders raise ``SuspiciousFileOperation`` for ``/static/../x``
    (and ``ValueError`` for a NUL in the path), which the handler, unlike a
    view, does not turn into a response: the client got a 500.
    """
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.core.exceptions import SuspiciousFileOperation
    from django.http import Http404

    class StaticFiles(ASGIStaticFilesHandler):
        def serve(self, request: Any) -> Any:
            try:
                return super().serve(request)
            except (SuspiciousFileOperation, ValueError):
                raise Http404("no such static file") from None

    return StaticFiles(app)


def __getattr__(name: str) -> Any:
    # ``conveyor.asgi.application``, built once on first access (PEP 562).
    if name != "application":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if "application" not in _built:
        _built["application"] = build_application()
    return _built["application"]
