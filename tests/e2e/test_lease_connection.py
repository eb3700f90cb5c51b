"""The node's own connections (leasing and one-task enqueues on the event loop, PostgreSQL).

A node leases, and inserts the tasks ``POST /api/v1/tasks`` receives,
through psycopg AsyncConnections of its own, named "conveyor-lease" in
pg_stat_activity. Killing those sessions must cost at most a retried lease
or a retried INSERT: a new connection is opened, no request fails, and
every task is stored and runs exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import httpx
import psycopg

from conveyor.dispatch.loop_lease import APPLICATION_NAME
from tests.e2e.conftest import _pg_admin_url, base_env
from tests.e2e.support import NodeProcess, WorkerProcess, wait_for


def _over_lease_sessions(database_url: str, column: str) -> list[object]:
    """*column* of pg_stat_activity for each of the node's own sessions."""
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT {column} FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            [name, APPLICATION_NAME],
        ).fetchall()
    return [r[0] for r in rows]


def _terminate_lease_sessions(database_url: str) -> int:
    return len(_over_lease_sessions(database_url, "pg_terminate_backend(pid)"))


def _lease_sessions(database_url: str) -> list[str]:
    """The last statement of each of the node's own sessions."""
    return _over_lease_sessions(database_url, "query")  # type: ignore[return-value]


def _cluster_env(pg_database: str, redis_url: str) -> dict[str, str]:
    return {
        **base_env(),
        "DATABASE_URL": pg_database,
        "REDIS_URL": redis_url,
        "CONVEYOR_CHANNEL_PREFIX": f"leaseconn{uuid.uuid4().hex[:6]}",
        "CONVEYOR_ALLOW_UNAUTHENTICATED": "1",
    }


def test_a_killed_lease_connection_is_replaced_and_no_task_is_lost(pg_database, redis_url, tmp_path):
    node = NodeProcess(_cluster_env(pg_database, redis_url), dev=False, name="node")
    worker = WorkerProcess(node.url, base_env(), tmp_path / "worker.jsonl", queues="lc=1", concurrency=4)
    try:
        worker.wait_connected(node)

        def done() -> Counter:
            return Counter(e["task"] for e in worker.events() if e["event"] == "done")

        first = node.enqueue(queue="lc", json={})
        wait_for(lambda: first["id"] in done(), 20, what="a task through the lease connection")
        assert _terminate_lease_sessions(pg_database) >= 1

        later = [node.enqueue(queue="lc", json={}, retention="5m")["id"] for _ in range(20)]
        wait_for(lambda: all(i in done() for i in later), 30, what="the tasks after the kill")
        time.sleep(0.5)  # a duplicate delivery would show up by now
        counts = done()
        assert all(counts[i] == 1 for i in later), counts
        assert all(node.task(i)["state"] == "completed" for i in later)
        # A new session serves the leases now.
        assert _terminate_lease_sessions(pg_database) >= 1
    finally:
        worker.kill()
        node.kill()


def test_rest_enqueues_are_inserted_on_the_nodes_own_connection_and_survive_losing_it(pg_database, redis_url):
    node = NodeProcess(_cluster_env(pg_database, redis_url), dev=False, name="node")
    try:
        first = node.enqueue(queue="nobody", json={"n": 0}, retention="5m")  # no worker: nothing leases
        assert first["state"] == "pending"
        sessions = _lease_sessions(pg_database)
        # The INSERT (which takes a node's offer of the queue if there is one).
        assert len(sessions) == 1 and "INSERT INTO conveyor_task" in sessions[0].replace('"', ""), sessions

        assert _terminate_lease_sessions(pg_database) == 1
        later = [node.enqueue(queue="nobody", json={"n": i}, retention="5m") for i in range(1, 6)]

        assert [t["json"]["n"] for t in later] == [1, 2, 3, 4, 5]
        stored = [node.task(t["id"]) for t in [first, *later]]
        assert [t["json"]["n"] for t in stored] == [0, 1, 2, 3, 4, 5]
        listed = node.api("GET", "/api/v1/tasks?queue=nobody&limit=100")["tasks"]
        assert len(listed) == 6  # each stored once, the retried INSERT included
        # A large body is parsed, stored and rendered in a database thread.
        # (The pool replaced the lost connection and may have grown by one
        # while the retry waited for it.)
        assert 1 <= _terminate_lease_sessions(pg_database) <= 2
        big = node.enqueue(queue="nobody", json={"blob": "x" * 100_000}, retention="5m")
        assert node.task(big["id"])["json"]["blob"] == "x" * 100_000
        assert _lease_sessions(pg_database) == []  # no new session: the loop's connections were not used
        # So does a task that needs more than one INSERT.
        unique = node.enqueue(queue="nobody", json={}, unique_key="k", retention="5m")
        assert unique["unique_key"] == "k"
        again = httpx.post(f"{node.url}/api/v1/tasks", json={"type": "e2e", "queue": "nobody", "unique_key": "k"})
        assert again.status_code == 409 and again.json()["error"] == "already_exists"
    finally:
        node.stop()
