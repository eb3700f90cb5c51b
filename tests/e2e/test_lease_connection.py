"""The node's own lease connection (leasing on the event loop, PostgreSQL).

A node leases through a psycopg AsyncConnection of its own, named
"conveyor-lease" in pg_stat_activity. Killing that session must cost at
most a retried lease: the dispatcher logs the failure, a new connection is
opened, and every task still runs exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import psycopg

from tests.e2e.conftest import _pg_admin_url, base_env
from tests.e2e.support import NodeProcess, WorkerProcess, wait_for


def _terminate_lease_sessions(database_url: str) -> int:
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            [name, "conveyor-lease"],
        ).fetchall()
    return len(rows)


def test_a_killed_lease_connection_is_replaced_and_no_task_is_lost(pg_database, redis_url, tmp_path):
    env = {
        **base_env(),
        "DATABASE_URL": pg_database,
        "REDIS_URL": redis_url,
        "CONVEYOR_CHANNEL_PREFIX": f"leaseconn{uuid.uuid4().hex[:6]}",
        "CONVEYOR_ALLOW_UNAUTHENTICATED": "1",
    }
    node = NodeProcess(env, dev=False, name="node")
    worker = WorkerProcess(node.url, base_env(), tmp_path / "worker.jsonl", queues="lc=1", concurrency=4)
    try:
        worker.wait_connected(node)

        def done() -> Counter:
            return Counter(e["task"] for e in worker.events() if e["event"] == "done")

        first = node.enqueue(queue="lc", json={})
        wait_for(lambda: first["id"] in done(), 20, what="a task through the lease connection")
        assert _terminate_lease_sessions(pg_database) == 1

        later = [node.enqueue(queue="lc", json={}, retention="5m")["id"] for _ in range(20)]
        wait_for(lambda: all(i in done() for i in later), 30, what="the tasks after the kill")
        time.sleep(0.5)  # a duplicate delivery would show up by now
        counts = done()
        assert all(counts[i] == 1 for i in later), counts
        assert all(node.task(i)["state"] == "completed" for i in later)
        # A new session serves the leases now.
        assert _terminate_lease_sessions(pg_database) == 1
    finally:
        worker.kill()
        node.kill()
