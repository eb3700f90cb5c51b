"""System checks: say at ``manage.py check`` time what a project is missing.

Each message names the setting to add and what it looks like, rather than
letting a node fail later (a loop of "channel layer receive failed", a 404
on ``/healthz``, a 500 on the dashboard).
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

BACKEND = "conveyor.django_tasks.ConveyorBackend"
API_APPS = {
    "rest_framework": "the REST API's pages",
    "drf_spectacular": "the OpenAPI schema's docs page",
}


@register()
def check_conveyor_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from conveyor.backoff import POLICIES
    from conveyor.conf import conveyor_settings

    conveyor_settings.reload()
    try:
        policy = conveyor_settings.RETRY_POLICY
        ttl = conveyor_settings.LEASE_TTL
        batch = conveyor_settings.LEASE_BATCH_MAX
    except (ValueError, TypeError) as exc:
        return [Error(f"invalid CONVEYOR setting: {exc}", id="conveyor.E001")]
    errors: list[CheckMessage] = []
    if policy not in POLICIES:
        errors.append(Error(f"CONVEYOR RETRY_POLICY must be one of {', '.join(POLICIES)}", id="conveyor.E002"))
    if ttl <= 0:
        errors.append(Error("CONVEYOR LEASE_TTL must be positive", id="conveyor.E003"))
    if batch < 1:
        errors.append(Error("CONVEYOR LEASE_BATCH_MAX must be at least 1", id="conveyor.E004"))
    errors.extend(_api_tokens())
    return errors


def _api_tokens() -> list[CheckMessage]:
    from conveyor.tokens import configured

    try:
        configured()
    except ValueError as exc:
        return [
            Error(
                f"invalid CONVEYOR API_TOKENS: {exc}",
                hint='each entry is a token string, or {"token": ..., "scopes": [...], "queues": [...]}'
                " with scopes from produce, consume, read, admin (docs/operations.md)",
                id="conveyor.E005",
            )
        ]
    return []


@register()
def check_host_project(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """What a project needs around the app: its apps, a channel layer, the URLs, the tasks backend."""
    return [*_apps(), *_channel_layer(), *_asgi(), *_urls(), *_tasks_backend(), *_sqlite()]


@register(deploy=True)
def check_production_services(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A cluster shares wakes through Redis and leases through PostgreSQL."""
    from django.conf import settings
    from django.db import connections

    messages: list[CheckMessage] = []
    backend = _layer_backend(settings)
    if backend is not None and "redis" not in backend.lower():
        messages.append(
            Warning(
                f"the channel layer is {backend}: nodes in other processes never hear its wakes",
                hint='use channels_redis.pubsub.RedisPubSubChannelLayer ({"CONFIG": {"hosts": ["redis://..."]}}); '
                "a production conveyord refuses to start without Redis",
                id="conveyor.W101",
            )
        )
    if connections["default"].vendor != "postgresql":
        messages.append(
            Warning(
                f"the default database is {connections['default'].vendor}, not PostgreSQL",
                hint="a production conveyord needs PostgreSQL (leases, advisory locks of sweeper leaders)",
                id="conveyor.W102",
            )
        )
    return messages


def _apps() -> list[CheckMessage]:
    from django.apps import apps

    missing = [name for name in API_APPS if not apps.is_installed(name)]
    if not missing:
        return []
    needs = "; ".join(f"{name}: {API_APPS[name]}" for name in missing)
    return [
        Error(
            f"Conveyor's API needs {', '.join(repr(n) for n in missing)} in INSTALLED_APPS ({needs})",
            hint=f"INSTALLED_APPS += {missing!r}",
            id="conveyor.E010",
        )
    ]


def _layer_backend(settings: Any) -> str | None:
    layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
    default = layers.get("default")
    return default.get("BACKEND") if isinstance(default, dict) else None


def _channel_layer() -> list[CheckMessage]:
    from django.conf import settings

    if _layer_backend(settings):
        return []
    return [
        Error(
            "Conveyor needs a channel layer: CHANNEL_LAYERS has no 'default' backend",
            hint='CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}} for one process, '
            "channels_redis.pubsub.RedisPubSubChannelLayer for a cluster (docs/install.md)",
            id="conveyor.E011",
        )
    ]


def _asgi() -> list[CheckMessage]:
    from django.conf import settings

    if getattr(settings, "ASGI_APPLICATION", None):
        return []
    return [
        Error(
            "ASGI_APPLICATION is not set: conveyord serves it (HTTP and the worker WebSockets)",
            hint='ASGI_APPLICATION = "conveyor.asgi.application" (your URLconf over HTTP, Conveyor\'s WebSockets)',
            id="conveyor.E012",
        )
    ]


def _urls() -> list[CheckMessage]:
    from conveyor.mount import prefix

    try:
        prefix()
    except LookupError:
        return [
            Warning(
                "conveyor.urls is not included in ROOT_URLCONF: a node here serves no API, probes or worker WebSocket",
                hint='urlpatterns += [path("conveyor/", include("conveyor.urls"))]',
                id="conveyor.W011",
            )
        ]
    return []


def _tasks_backend() -> list[CheckMessage]:
    from django.conf import settings

    tasks = getattr(settings, "TASKS", None) or {}
    if any(isinstance(c, dict) and c.get("BACKEND") == BACKEND for c in tasks.values()):
        return []
    return [
        Warning(
            "no TASKS backend is Conveyor's: django.tasks functions will not run on Conveyor",
            hint=f'TASKS = {{"default": {{"BACKEND": "{BACKEND}"}}}} (silence conveyor.W012 if you only use the SDK)',
            id="conveyor.W012",
        )
    ]


def _sqlite() -> list[CheckMessage]:
    from django.db import connections

    config = connections["default"].settings_dict
    if config.get("ENGINE") != "django.db.backends.sqlite3":
        return []
    if (config.get("OPTIONS") or {}).get("transaction_mode") == "IMMEDIATE":
        return []
    return [
        Warning(
            "SQLite without OPTIONS transaction_mode 'IMMEDIATE': two processes that read, then write, can fail "
            "with 'database is locked'",
            hint='DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 30, '
            '"init_command": "PRAGMA journal_mode=WAL;"} (docs/install.md)',
            id="conveyor.W013",
        )
    ]
