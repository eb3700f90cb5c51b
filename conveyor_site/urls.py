from __future__ import annotations

from django.contrib import admin
from django.urls import path

from conveyor import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
]
