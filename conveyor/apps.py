from __future__ import annotations

from django.apps import AppConfig


class ConveyorConfig(AppConfig):
    name = "conveyor"
    verbose_name = "Conveyor"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conveyor import checks  # noqa: F401  (registers system checks)
        from conveyor.conf import connect_signals
        from conveyor.models import Task

        connect_signals()
        Task.register_lookups()
