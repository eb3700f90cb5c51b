from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "conveyor.dashboard"
    # Not "dashboard": a host project may well have an app of that name.
    label = "conveyor_dashboard"
    verbose_name = "Conveyor dashboard"
