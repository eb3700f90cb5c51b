"""Probe the local services the tests use (no Django needed)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def postgres_problem(url: str) -> str | None:
    """None when PostgreSQL at *url* accepts a connection, else why not."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed: {exc}"
    parts = urlsplit(url)
    try:
        conn = psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=parts.username or "postgres",
            password=parts.password or None,
            dbname=parts.path.lstrip("/") or "postgres",
            connect_timeout=3,
        )
        conn.close()
    except Exception as exc:
        return f"PostgreSQL at {parts.hostname}:{parts.port or 5432} is not reachable: {exc}"
    return None


def redis_problem(url: str) -> str | None:
    """None when Redis at *url* answers PING, else why not."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=3) as sock:
            sock.sendall(b"PING\r\n")
            if not sock.recv(64).startswith(b"+PONG"):
                return "Redis did not answer PING"
    except OSError as exc:
        return f"Redis at {parts.hostname}:{parts.port or 6379} is not reachable: {exc}"
    return None
