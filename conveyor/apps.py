from __future__ import annotations

from importlib.util import find_spec

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured

# What the app imports beyond Django (the `server` extra); checked up front so
# a base install (the SDK alone) in a Django project says what to install.
SERVER_MODULES = (
    "channels",
    "uvicorn",
    "rest_framework",
    "drf_spectacular",
    "psycopg",
    "croniter",
    "prometheus_client",
)


def require_server_extra() -> None:
    missing = [name for name in SERVER_MODULES if find_spec(name) is None]
    if missing:
        raise ImproperlyConfigured(
            f"the conveyor app needs its server dependencies (missing: {', '.join(missing)}): "
            'pip install "conveyor[server]"'
        )


class ConveyorConfig(AppConfig):
    name = "conveyor"
    verbose_name = "Conveyor"
    default_auto_field = "django.db.models.BigAutoField"

    def __init__(self, app_name: str, app_module: object) -> None:
        require_server_extra()
        super().__init__(app_name, app_module)

    def ready(self) -> None:
        from conveyor import checks  # noqa: F401  (registers system checks)
        from conveyor.conf import connect_signals
        from conveyor.models import Task

        connect_signals()
        Task.register_lookups()
