"""Leadership by PostgreSQL session advisory lock.

Every node runs every sweeper; a sweeper acts only while its node holds the
sweeper's advisory lock. The lock lives on one database connection: the one
of the sweeper's own thread. If the node dies, Postgres ends its session and
the lock frees; another node takes it on its next tick. SQLite is a single
node, which always leads.
"""

from __future__ import annotations

import zlib

from django.db import connections

NAMESPACE = 0x636F6E76  # "conv"


def lock_key(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


class LeaderLock:
    """Not thread-safe: use it from one thread only (it owns that thread's connection)."""

    def __init__(self, name: str, using: str = "default") -> None:
        self.name = name
        self.using = using
        self.key = lock_key(name)
        self._pid: int | None = None  # backend that holds the lock

    def acquire(self) -> bool:
        """Try to hold the lock now; True while this connection holds it."""
        conn = connections[self.using]
        if conn.vendor != "postgresql":
            return True
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), pg_try_advisory_lock(%s, %s)", [NAMESPACE, self.key])
            pid, got = cursor.fetchone()
            if got and self._pid == pid:
                # Session locks stack: undo the extra level we just took.
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE, self.key])
        # A new backend pid means the old connection (and its lock) is gone.
        self._pid = pid if got else None
        return bool(got)

    def release(self) -> None:
        conn = connections[self.using]
        if conn.vendor != "postgresql" or self._pid is None:
            return
        try:
            # Only this lock: a connection may hold others (the webhook manager
            # keeps one per registration on one connection). acquire() keeps
            # the session's count at one, so one unlock frees it.
            with conn.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE, self.key])
        finally:
            self._pid = None

    @property
    def held(self) -> bool:
        return self._pid is not None or connections[self.using].vendor != "postgresql"
