"""Turn a ``DATABASE_URL`` into a Django ``DATABASES`` entry.

Only the two engines Conveyor supports are understood: ``sqlite:///path``
(relative to the project) or ``sqlite:////abs/path``, and
``postgres://user:pass@host:port/name?option=value``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

SQLITE_OPTIONS = {
    # One writer at a time: BEGIN IMMEDIATE takes the write lock up front, so
    # a lease transaction never upgrades a read lock and deadlocks.
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": (
        "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=30000;PRAGMA foreign_keys=ON;"
    ),
}


def parse_database_url(url: str, base_dir: Path) -> dict[str, Any]:
    """Return the ``DATABASES`` entry for *url*; raise ``ValueError`` if unsupported."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return _sqlite(parts.path, base_dir)
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        return _postgres(parts)
    raise ValueError(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported; use sqlite:///path or postgres://user@host:port/name"
    )


def sqlite_config(path: Path) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": dict(SQLITE_OPTIONS),
        # Keep each thread's connection open: reopening runs the PRAGMAs again.
        "CONN_MAX_AGE": None,
        "TEST": {"NAME": str(path.with_name("test-" + path.name))},
    }


def _sqlite(raw_path: str, base_dir: Path) -> dict[str, Any]:
    # sqlite:///var/x.db -> path "/var/x.db" relative to the project;
    # sqlite:////tmp/x.db -> absolute "/tmp/x.db".
    path = raw_path[1:] if raw_path.startswith("/") else raw_path
    if not path:
        raise ValueError("DATABASE_URL sqlite:/// needs a file path")
    file = Path(path) if path.startswith("/") else base_dir / path
    return sqlite_config(file)


def _postgres(parts: Any) -> dict[str, Any]:
    # TCP keepalives: a node whose machine vanished (no FIN) loses its
    # advisory locks within about 25 s instead of the kernel's two hours.
    options = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3"}
    options.update(dict(parse_qsl(parts.query)))
    name = unquote(parts.path.lstrip("/")) or "postgres"
    config: dict[str, Any] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        # Persistent connections: every node thread keeps one open. A broken
        # connection is dropped by Django after the error and reopened on the
        # next use, so a restarted Postgres needs no node restart.
        "CONN_MAX_AGE": None,
        "OPTIONS": options,
    }
    return config
