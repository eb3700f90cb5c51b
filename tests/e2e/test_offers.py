"""Offers end to end: a real node lends its idle credit, a real producer process takes it.

PostgreSQL + Redis only (offers need LISTEN/NOTIFY). The producer is
tests/e2e/producer_app.py, enqueuing from Django code as an application
does; its INSERT takes a node's offer when the queue is drained and a
worker idle (docs/architecture.md, "Offers"). Lease ids say which path a
task took: a lease query's end in "." and a digest, an offer's in ".o"
and a number.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from tests.e2e.support import ROOT, max_overlap, wait_for

pytestmark = pytest.mark.parametrize("mode", ["cluster"])


class Producer:
    """A producer process (tests/e2e/producer_app.py) enqueuing *count* tasks from Django code.

    *ready*: it sets up and connects first, then enqueues only when told
    (``states``), within milliseconds.
    """

    def __init__(
        self, cluster: Any, count: int, interval: float = 0.0, payload: Any = None, *, ready: bool = False
    ) -> None:
        argv = [sys.executable, str(ROOT / "tests" / "e2e" / "producer_app.py"), "default", str(count), str(interval)]
        argv += [json.dumps(payload or {}), *(["--wait"] if ready else [])]
        self.ready = ready
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=cluster.env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if ready:
            assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def states(self) -> list[str]:
        """Enqueue (if it waits to be told) and run to the end; the states the enqueues returned."""
        out, err = self.proc.communicate("go\n" if self.ready else "", timeout=300)
        assert self.proc.returncode == 0, err[-3000:]
        return [line.split()[1] for line in out.splitlines()]


READ_TAKEN = "tasks of taken offers whose notification had not come"


def sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def open_offers(dsn: str) -> int:
    return sql(dsn, "SELECT count(*) FROM conveyor_offer")[0][0]


def offered_leases(dsn: str) -> int:
    return sql(dsn, "SELECT count(*) FROM conveyor_task WHERE lease_id LIKE '%%.o%%'")[0][0]


def test_tasks_from_django_code_reach_an_idle_worker_through_offers(cluster, pg_database):
    node = cluster.node(completed_retention=3600)
    worker = cluster.worker(node, concurrency=2, record_dsn=pg_database)
    worker.wait_connected(node)
    wait_for(lambda: open_offers(pg_database) == 2, 20, what="the idle worker's two credits offered")

    states = Producer(cluster, 40, 0.05).states()

    wait_for(lambda: sum(e["event"] == "done" for e in worker.events()) == 40, 60, what="40 completions")
    # At a trickle the queue is drained between tasks: the enqueue returns
    # the task already leased to the node, and its lease is the offer's.
    assert states.count("active") >= 30, states
    assert offered_leases(pg_database) == states.count("active")
    assert sql(pg_database, "SELECT count(*), count(DISTINCT task_id) FROM e2e_executions")[0] == (40, 40)
    holders = sql(pg_database, "SELECT DISTINCT lease_holder FROM conveyor_task WHERE lease_id LIKE '%%.o%%'")
    assert len(holders) == 1
    wait_for(lambda: open_offers(pg_database) == 2, 20, what="the credit offered again")


def test_two_nodes_and_two_producers_deliver_each_task_once_within_concurrency(cluster, pg_database):
    first, second = cluster.node(completed_retention=3600), cluster.node(completed_retention=3600)
    workers = [cluster.worker(n, concurrency=3, record_dsn=pg_database) for n in (first, second)]
    for worker, node in zip(workers, (first, second), strict=True):
        worker.wait_connected(node)
    wait_for(lambda: open_offers(pg_database) == 6, 20, what="both workers' credit offered")

    # Two producers, back to back: offers taken, withdrawn on wakes, leased
    # the ordinary way when none is left, offered again as tasks finish.
    producers = [Producer(cluster, 300, 0.0, {"sleep": 0.005}) for _ in range(2)]
    for producer in producers:
        assert len(producer.states()) == 300

    wait_for(lambda: sql(pg_database, "SELECT count(*) FROM e2e_executions")[0][0] >= 600, 120, what="600 runs")
    wait_for(
        lambda: sql(pg_database, "SELECT count(*) FROM conveyor_task WHERE state <> 'completed'")[0][0] == 0,
        60,
        what="all completed",
    )
    assert sql(pg_database, "SELECT count(*), count(DISTINCT task_id) FROM e2e_executions")[0] == (600, 600)
    for worker in workers:
        assert max_overlap(worker.events())[None] <= 3
    assert offered_leases(pg_database) >= 6  # the six offers out at the start were taken, at least


def test_a_taken_offer_whose_notification_is_lost_is_read_by_its_node(cluster, pg_database):
    # No self-check to race with: the node learns of the taken offer at its next withdraw, on a wake.
    node = cluster.node(completed_retention=3600, dispatch_self_check=60)
    worker = cluster.worker(node, concurrency=1)
    worker.wait_connected(node)
    producer = Producer(cluster, 1, ready=True)
    wait_for(lambda: open_offers(pg_database) == 1, 20, what="the idle worker's credit offered")
    # The notification goes to a channel nobody listens on: lost.
    sql(pg_database, "UPDATE conveyor_offer SET channel = 'conveyor_offers_nobody'")

    assert producer.states() == ["active"]
    woken = node.enqueue(json={})  # no offer left: stored pending, and its wake withdraws the offers

    # The node finds its offer taken, reads that task by its lease id, then
    # leases the second once the first has freed the worker's one slot.
    done = wait_for(
        lambda: (d := [e for e in worker.events() if e["event"] == "done"]) and len(d) == 2 and d, 20, what="two runs"
    )
    assert woken["state"] == "pending"
    assert [e["attempt"] for e in done] == [1, 1] and done[1]["task"] == woken["id"]
    assert READ_TAKEN in node.output()


def test_a_worker_that_leaves_and_a_node_that_drains_take_their_offers_back(cluster, pg_database):
    node = cluster.node()
    leaving = cluster.worker(node, concurrency=2, queues="a=1")
    staying = cluster.worker(node, concurrency=3, queues="b=1")
    leaving.wait_connected(node, count=2)
    wait_for(lambda: open_offers(pg_database) == 5, 20, what="five credits offered")

    leaving.signal(signal.SIGTERM)
    wait_for(
        lambda: sql(pg_database, "SELECT queue, count(*) FROM conveyor_offer GROUP BY queue") == [("b", 3)],
        20,
        what="the leaving worker's offers withdrawn, the other's still out",
    )

    assert node.stop() == 0
    assert open_offers(pg_database) == 0
    staying.kill()


def test_tasks_taken_while_the_listen_connection_was_down_are_read_after_it_returns(cluster, pg_database):
    # A self-check too far away to matter: only the reconnect finds the tasks.
    node = cluster.node(completed_retention=3600, dispatch_self_check=60)
    worker = cluster.worker(node, concurrency=3, record_dsn=pg_database)
    worker.wait_connected(node)
    producer = Producer(cluster, 3, ready=True)
    wait_for(lambda: open_offers(pg_database) == 3, 20, what="the idle worker's credit offered")

    # The offers are taken while their notifications reach nobody, then the
    # node's LISTEN session is killed: what it missed, it must find itself.
    sql(pg_database, "UPDATE conveyor_offer SET channel = 'conveyor_offers_nobody'")
    assert producer.states() == ["active"] * 3
    sql(
        pg_database, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'conveyor-offers'"
    )

    # Back on a new connection, the node withdraws its offers, finds them taken and reads the tasks.
    wait_for(lambda: sql(pg_database, "SELECT count(*) FROM e2e_executions")[0][0] == 3, 30, what="three runs")
    assert sql(pg_database, "SELECT count(*), count(DISTINCT task_id) FROM e2e_executions")[0] == (3, 3)
    assert READ_TAKEN in node.output()
    wait_for(lambda: open_offers(pg_database) == 3, 20, what="the credit offered again")
