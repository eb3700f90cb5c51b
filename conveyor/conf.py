"""Conveyor's engine settings: one namespaced dict, read lazily.

``settings.CONVEYOR`` overrides the defaults below; ``conveyor_site.settings``
fills it from ``CONVEYOR_<NAME>`` environment variables. Read values through
``conveyor_settings.NAME``; the cache is dropped on ``setting_changed`` so
``override_settings(CONVEYOR=...)`` works in tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from conveyor.durations import parse_duration

DAY = 86400.0

# name -> (default, kind). Kinds: int, float, duration, bool, str, list, json, keyring,
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
    # Attempt history: the last N attempts kept per task (0: none recorded)
    "ATTEMPTS_KEPT": (25, "int"),
    # Groups
    "GROUP_MAX_SIZE": (100, "int"),
    "GROUP_MAX_DELAY": (60.0, "duration"),
    "GROUP_GRACE": (10.0, "duration"),
    # Sweepers
    "SCHEDULER_INTERVAL": (1.0, "duration"),
    "REAPER_INTERVAL": (15.0, "duration"),
    "GROUP_SWEEP_INTERVAL": (1.0, "duration"),
    # How often the leader looks for nodes PostgreSQL saw die (their
    # liveness lock free) to rescue their leases (conveyor/sweepers/rescuer.py)
    "NODE_RESCUE_INTERVAL": (0.25, "duration"),
    # Bulk actions on a filter (conveyor/broker/bulk.py): tasks per batch
    # (one transaction each), batches per pass of the leader's bulk sweeper
    "BULK_SWEEP_INTERVAL": (1.0, "duration"),
    "BULK_BATCH_SIZE": (500, "int"),
    "BULK_BATCHES_PER_PASS": (10, "int"),
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
    # Encryption at rest: key id -> 32-byte secret, the first one active
    # ("k2:BASE64,k1:BASE64"; docs/encryption.md)
    "ENCRYPTION_KEYS": ((), "keyring"),
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
    if kind == "keyring":
        return parse_keyring(value)
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


KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def parse_keyring(value: Any) -> tuple[tuple[str, bytes], ...]:
    """``ENCRYPTION_KEYS`` as (key id, secret) pairs, the active key first.

    Takes ``"id:BASE64,id:BASE64"`` (the environment's form), a list of
    ``"id:BASE64"`` strings, or a mapping of id to a base64 string or 32
    bytes. Messages name the key id, never the secret.
    """
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, Mapping):
        items = list(value.items())
    else:
        items = []
        for entry in value:
            if isinstance(entry, (tuple, list)) and len(entry) == 2:
                items.append((entry[0], entry[1]))
                continue
            key_id, sep, secret = str(entry).partition(":")
            if not sep:
                raise ValueError("ENCRYPTION_KEYS: each key is id:BASE64 (e.g. k1:" + "A" * 43 + "=)")
            items.append((key_id.strip(), secret.strip()))
    ring: list[tuple[str, bytes]] = []
    for key_id, secret in items:
        if not isinstance(key_id, str) or not KEY_ID.match(key_id):
            raise ValueError(f"ENCRYPTION_KEYS: key id {str(key_id)[:70]!r} must be 1-64 of A-Z a-z 0-9 . _ -")
        raw = secret if isinstance(secret, bytes) else _secret_bytes(key_id, secret)
        if len(raw) != 32:
            raise ValueError(f"ENCRYPTION_KEYS: key {key_id!r} is {len(raw)} bytes; AES-256 needs 32")
        if key_id in dict(ring):
            raise ValueError(f"ENCRYPTION_KEYS: key id {key_id!r} appears twice")
        ring.append((key_id, raw))
    return tuple(ring)


def _secret_bytes(key_id: str, text: Any) -> bytes:
    import base64
    import binascii

    try:
        cleaned = str(text).replace("-", "+").replace("_", "/")
        return base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"ENCRYPTION_KEYS: the secret of key {key_id!r} is not base64") from None


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
