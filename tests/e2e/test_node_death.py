"""Node death: a SIGKILLed node's tasks are delivered again before their leases would have expired.

PostgreSQL + Redis, two real nodes. The node dies with a task delivered to
its worker; PostgreSQL frees its liveness lock at once, the survivor's
rescuer releases the task, with no attempt charged (docs/architecture.md,
"Node death"), and the survivor's worker runs it. The lease is long (300 s), so a
task delivered again only by lease expiry could not finish within the
test's wait.
"""

from __future__ import annotations

import pytest

from tests.e2e.support import wait_for
from tests.e2e.test_offers import open_offers, sql

pytestmark = pytest.mark.parametrize("mode", ["cluster"])

LEASE_TTL = 300


def test_a_killed_nodes_task_runs_again_on_the_survivor_before_its_lease_would_have_expired(cluster, pg_database):
    doomed = cluster.node(lease_ttl=LEASE_TTL, completed_retention=3600)
    survivor = cluster.node(lease_ttl=LEASE_TTL, completed_retention=3600)
    first = cluster.worker(doomed, concurrency=1)
    first.wait_connected(doomed)
    wait_for(lambda: open_offers(pg_database) == 1, 20, what="the idle worker's credit offered")

    # The first run, on the doomed node's worker, would last an hour; the next finishes at once.
    task_id = survivor.enqueue(json={"hang_in": first.pid})["id"]
    wait_for(lambda: any(e["event"] == "start" for e in first.events()), 20, what="the first attempt to start")
    second = cluster.worker(survivor, concurrency=1)
    second.wait_connected(survivor)
    ((holder, expires),) = sql(
        pg_database, "SELECT lease_holder, lease_expires_at FROM conveyor_task WHERE id = %s", task_id
    )
    assert f"-{doomed.pid}-" in holder  # leased through the node about to die

    doomed.kill()

    wait_for(lambda: survivor.task(task_id)["state"] == "completed", 60, what="the task to complete on the survivor")
    ((retried, suspect, started_at),) = sql(
        pg_database, "SELECT retried, suspect, started_at FROM conveyor_task WHERE id = %s", task_id
    )
    assert started_at < expires  # delivered again while its first lease still ran
    assert (retried, suspect) == (0, False)  # a node's death charges nothing, suspects nothing
    runs = [e for e in second.events() if e["task"] == task_id]
    assert [(e["event"], e["attempt"]) for e in runs] == [("start", 1), ("done", 1)]


def test_a_task_a_webhook_endpoint_accepted_is_left_to_it_when_its_node_dies(cluster, pg_database, tmp_path):
    from tests.e2e.test_webhooks import Endpoint, free_port, register, wait_serving

    doomed = cluster.node(lease_ttl=LEASE_TTL)
    port = free_port()
    register(doomed, f"http://127.0.0.1:{port}/tasks")
    wait_serving(doomed)  # the only node: it serves the registration
    survivor = cluster.node(lease_ttl=LEASE_TTL)
    endpoint = Endpoint(tmp_path, survivor.url, port=port)  # its callbacks go to the survivor
    try:
        task_id = doomed.enqueue(json={"async": 6})["id"]  # accepted, then reported 6 s later
        wait_for(lambda: endpoint.events("execute"), 20, what="the delivery")
        wait_for(lambda: holder(pg_database, task_id) == "webhook:hooks", 10, what="the lease handed to the endpoint")

        doomed.kill()

        wait_for(lambda: survivor.task(task_id)["state"] == "completed", 60, what="the endpoint's report")
        assert [e["attempt"] for e in endpoint.events("execute")] == [1]  # never delivered again
    finally:
        endpoint.kill()


def holder(dsn: str, task_id: str) -> str:
    return sql(dsn, "SELECT lease_holder FROM conveyor_task WHERE id = %s", task_id)[0][0]
