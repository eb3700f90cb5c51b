"""Everything a host project mounts: ``path("conveyor/", include("conveyor.urls"))``.

The REST API and its schema, the health probes, Prometheus metrics and (when ``conveyor.dashboard`` is installed)
the dashboard, all under whatever prefix the host picks. Names live in the
``conveyor`` namespace (``reverse("conveyor:healthz")``); the node serves
its WebSockets (``conveyor.routing``) and the Connect services
(``conveyor.connect``, in ``conveyor.asgi``) under the same prefix.
"""

from __future__ import annotations

from django.apps import apps
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from conveyor import health
from conveyor.api.events import events_stream
from conveyor.metrics import metrics_view

app_name = "conveyor"

# The schema describes Conveyor's API whatever the host's SPECTACULAR_SETTINGS say.
SCHEMA_SETTINGS = {
    "TITLE": "Conveyor API",
    "DESCRIPTION": "Producer and operator API of the Conveyor task queue.",
    "VERSION": "1",
    "COMPONENT_SPLIT_REQUEST": True,
}

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/schema", SpectacularAPIView.as_view(custom_settings=SCHEMA_SETTINGS), name="schema"),
    path("api/v1/docs", SpectacularSwaggerView.as_view(url_name="conveyor:schema"), name="api-docs"),
    # The same page with a trailing slash (before the API's own routes, which would 404 it).
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="conveyor:schema")),
    path("api/v1/events", events_stream, name="events"),
    path("api/v1/", include("conveyor.api.urls")),
]

if apps.is_installed("conveyor.dashboard"):
    urlpatterns.append(path("", include("conveyor.dashboard.urls")))
