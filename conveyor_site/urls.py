from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from conveyor import health
from conveyor.api.connect import connect_call
from conveyor.api.events import events_stream
from conveyor.metrics import metrics_view

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/events", events_stream, name="events"),
    path("api/v1/", include("conveyor.api.urls")),
    path("conveyor.v1.<str:service>/<str:method>", connect_call, name="connect"),
    path("admin/", admin.site.urls),
    path("", include("dashboard.urls")),
]
