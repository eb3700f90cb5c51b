"""Leadership by PostgreSQL advisory lock: one holder, handed over when its session ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from conveyor.sweepers.leader import NAMESPACE, LeaderLock, lock_key
from tests.conftest import skip_without_postgres

ALIAS = "postgres"

# Locks live on real sessions: transactional, PostgreSQL only.
pytestmark = pytest.mark.django_db(
    transaction=True, databases=[alias for alias in (ALIAS,) if alias in settings.DATABASES]
)


class LockThread:
    """A lock on a thread of its own, hence on a database connection of its own."""

    def __init__(self, name: str) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.lock = LeaderLock(name, using=ALIAS)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.pool.submit(fn, *args).result(timeout=30)

    def acquire(self) -> bool:
        return self.run(self.lock.acquire)

    def release(self) -> None:
        self.run(self.lock.release)

    def backend_pid(self) -> int:
        return self.run(_query, "SELECT pg_backend_pid()")

    def unlock_once(self) -> bool:
        """One level of the session lock, as pg_advisory_unlock counts it."""
        return self.run(_query, "SELECT pg_advisory_unlock(%s, %s)", [NAMESPACE, self.lock.key])

    def disconnect(self) -> None:
        self.run(lambda: connections[ALIAS].close())

    def close(self) -> None:
        self.disconnect()
        self.pool.shutdown(wait=True)


def _query(sql: str, params: list[Any] | None = None) -> Any:
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def holders(name: str) -> list[int]:
    """Backend pids holding the advisory lock of *name* (asked on a third connection)."""
    with connections[ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s AND objsubid = 2"
            " AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [NAMESPACE, lock_key(name)],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def two_locks(request: pytest.FixtureRequest) -> Iterator[tuple[LockThread, LockThread]]:
    skip_without_postgres()
    name = f"conveyor.test.{request.node.name}"
    a, b = LockThread(name), LockThread(name)
    yield a, b
    a.close()
    b.close()


def test_only_one_of_two_connections_acquires_the_lock(two_locks):
    a, b = two_locks

    assert a.acquire() is True
    assert b.acquire() is False
    assert holders(a.lock.name) == [a.backend_pid()]
    assert (a.lock.held, b.lock.held) == (True, False)


def test_the_holder_keeps_the_lock_on_every_tick(two_locks):
    a, b = two_locks
    a.acquire()

    assert [a.acquire() for _ in range(3)] == [True, True, True]
    assert [b.acquire() for _ in range(3)] == [False, False, False]


def test_the_other_acquires_after_the_holders_connection_closes(two_locks):
    a, b = two_locks
    assert a.acquire()
    assert not b.acquire()

    a.disconnect()  # what a dead node's session looks like to Postgres
    # The server ends the session (and frees its locks) a moment after the
    # client's socket closes: on a busy machine, not before the next line.
    deadline = time.monotonic() + 10
    while holders(a.lock.name) and time.monotonic() < deadline:
        time.sleep(0.01)

    assert b.acquire() is True
    assert holders(b.lock.name) == [b.backend_pid()]
    assert a.acquire() is False  # the old holder, reconnected, is now the follower


def test_re_acquiring_keeps_the_lock_count_at_one(two_locks):
    a, b = two_locks
    for _ in range(4):
        assert a.acquire()

    assert a.unlock_once() is True  # one level was all there was
    assert b.acquire() is True


def test_release_frees_the_lock_for_the_other(two_locks):
    a, b = two_locks
    a.acquire()
    a.acquire()

    a.release()

    assert a.lock.held is False
    assert holders(a.lock.name) == []
    assert b.acquire() is True


def test_release_frees_only_its_own_lock_on_a_shared_connection(request):
    # The webhook manager holds one lock per registration on one connection.
    skip_without_postgres()
    thread = LockThread(f"conveyor.test.{request.node.name}.one")
    other = LeaderLock(f"conveyor.test.{request.node.name}.two", using=ALIAS)
    try:
        assert thread.acquire()
        assert thread.run(other.acquire)

        thread.release()

        assert holders(other.name) == [thread.backend_pid()]
        assert holders(thread.lock.name) == []
    finally:
        thread.close()


def test_release_without_holding_does_nothing(two_locks):
    a, b = two_locks
    b.acquire()

    a.release()

    assert holders(b.lock.name) == [b.backend_pid()]


def test_on_sqlite_a_single_node_always_leads():
    lock = LeaderLock("conveyor.test.sqlite", using="default")

    assert lock.acquire() is True
    assert lock.acquire() is True
    assert lock.held is True
    lock.release()


def test_lock_keys_are_stable_and_distinct_per_name():
    assert lock_key("conveyor.sweeper.reaper") == lock_key("conveyor.sweeper.reaper")
    assert lock_key("conveyor.sweeper.reaper") != lock_key("conveyor.sweeper.scheduler")
    assert 0 <= lock_key("x" * 500) < 2**31
