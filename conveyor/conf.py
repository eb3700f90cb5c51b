"""Conveyor's engine settings: one namespaced dict, read lazily.

``settings.CONVEYOR`` overrides the defaults below; ``conveyor_site.settings``
fills it from ``CONVEYOR_<NAME>`` environment variables. Read values through
``conveyor_settings.NAME``; the cache is dropped on ``setting_changed`` so
``override_settings(CONVEYOR=...)`` works in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.durations import parse_duration

DAY = 86400.0

# name -> (default, kind). Kinds: int, float, duration, bool, str, list, json,
# tokens (a JSON list, or a comma-separated list when it does not start with "[").
SPEC: dict[str, tuple[Any, str]] = {
    # Leasing and dispatch
    "LEASE_TTL": (60.0, "duration"),
    "LEASE_BATCH_MAX": (100, "int"),
    "DB_THREADS": (4, "int"),
    "PREPARED_STATEMENTS": (True, "bool"),
    "LEASE_ASYNC_COMMIT": (True, "bool"),
    "SHUTDOWN_TIMEOUT": (10.0, "duration"),
    "DISPATCH_SELF_CHECK": (5.0, "duration"),
    "TYPE_BREAKER_PROBE_DELAY": (1.0, "duration"),
    # Task defaults and limits
    "DEFAULT_PRIORITY": (4, "int"),
    "MAX_RETRY": (25, "int"),
    "RETRY_POLICY": ("exponential", "str"),
    "RETRY_BASE": (2.0, "duration"),
    "RETRY_CAP": (900.0, "duration"),
    "PAYLOAD_MAX_BYTES": (1024 * 1024, "int"),
    "BATCH_MAX_ITEMS": (1000, "int"),
    "MAX_DEPENDENCIES": (1000, "int"),
    "LIST_PAGE_DEFAULT": (50, "int"),
    "LIST_PAGE_MAX": (1000, "int"),
    # Retention
    "COMPLETED_RETENTION": (0.0, "duration"),
    "ARCHIVE_RETENTION": (7 * DAY, "duration"),
    # Groups
    "GROUP_MAX_SIZE": (100, "int"),
    "GROUP_MAX_DELAY": (60.0, "duration"),
    "GROUP_GRACE": (10.0, "duration"),
    # Sweepers
    "SCHEDULER_INTERVAL": (1.0, "duration"),
    "REAPER_INTERVAL": (15.0, "duration"),
    "GROUP_SWEEP_INTERVAL": (1.0, "duration"),
    "NODE_HEARTBEAT_INTERVAL": (2.0, "duration"),
    # Publish lifecycle events to /ws/events and SSE subscribers (metrics and
    # history count them either way)
    "EVENTS": (True, "bool"),
    # One conveyor.access INFO record per HTTP request the node serves
    "ACCESS_LOG": (False, "bool"),
    # API and security
    # Plain tokens (comma-separated) or a JSON list of tokens and scoped-token
    # objects (conveyor.tokens)
    "API_TOKENS": ([], "tokens"),
    "READ_ONLY": (False, "bool"),
    "ALLOW_UNAUTHENTICATED": (False, "bool"),
    # /metrics needs a token with the read scope (when tokens are configured)
    "METRICS_AUTH": (False, "bool"),
    # Webhooks
    "WEBHOOKS_ALLOW_PRIVATE_TARGETS": (False, "bool"),
    "WEBHOOK_REQUEST_TIMEOUT": (30.0, "duration"),
    "WEBHOOKS": ([], "json"),
    "CRON": ([], "json"),
}

DEFAULTS = {name: default for name, (default, _kind) in SPEC.items()}


def coerce(name: str, value: Any) -> Any:
    """Convert *value* to the kind of setting *name*; raise ``ValueError``."""
    kind = SPEC[name][1]
    if kind == "duration":
        return parse_duration(value)
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError(f"{name} must be an integer")
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        return _coerce_bool(name, value)
    if kind == "list":
        return coerce_list(value)
    if kind == "tokens":
        return _coerce_tokens(name, value)
    if kind == "json":
        if isinstance(value, str):
            import json

            return json.loads(value)
        return value
    return str(value)


def coerce_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return list(value)


def _coerce_tokens(name: str, value: Any) -> list[Any]:
    if isinstance(value, str):
        if not value.strip().startswith("["):
            return coerce_list(value)
        import json

        value = json.loads(value)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a list of tokens")
    return list(value)


def _coerce_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be a boolean (1/0, true/false)")


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """Collect ``CONVEYOR_<NAME>`` overrides from *environ* (raw strings)."""
    return {name: environ[f"CONVEYOR_{name}"] for name in SPEC if f"CONVEYOR_{name}" in environ}


class ConveyorSettings:
    """Lazy view of the defaults merged with ``settings.CONVEYOR``."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        from django.conf import settings

        merged = dict(DEFAULTS)
        user = getattr(settings, "CONVEYOR", {}) or {}
        unknown = sorted(set(user) - set(SPEC))
        if unknown:
            raise ValueError(f"unknown CONVEYOR settings: {', '.join(unknown)}")
        for name, value in user.items():
            merged[name] = coerce(name, value)
        return merged

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._cache is None:
            self._cache = self._load()
        try:
            return self._cache[name]
        except KeyError:
            raise AttributeError(f"no Conveyor setting {name!r}") from None

    def reload(self) -> None:
        self._cache = None


conveyor_settings = ConveyorSettings()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "CONVEYOR":
        conveyor_settings.reload()


def connect_signals() -> None:
    from django.core.signals import setting_changed

    setting_changed.connect(_on_setting_changed, dispatch_uid="conveyor-settings")
