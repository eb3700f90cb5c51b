"""Sweepers end to end: cron, leadership, lease recovery, scheduling, groups, dependencies."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.e2e.support import wait_for
from tests.e2e.test_dispatch import ts, wait_state

FAST = {"reaper_interval": 0.5, "node_heartbeat_interval": 0.5}


def tasks_of_type(node, task_type, state=None):
    params = {"type": task_type, "limit": 1000}
    if state:
        params["state"] = state
    return node.api("GET", "/api/v1/tasks", params=params)["tasks"]


def leaders(node):
    return {name: n["id"] for n in node.api("GET", "/api/v1/cluster")["nodes"] for name in n["leader_of"]}


@pytest.mark.parametrize("mode", ["cluster"])
def test_every_second_cron_across_two_nodes_fires_each_slot_once(cluster):
    first, second = cluster.node(**FAST), cluster.node(**FAST)
    first.api("POST", "/api/v1/cron", json={"id": "tick", "spec": "*/1 * * * * *", "task_type": "tick", "json": {}})
    time.sleep(6.5)
    first.api("POST", "/api/v1/cron/tick/pause")
    fired = tasks_of_type(second, "tick")
    slots = [t["metadata"]["conveyor.slot"] for t in fired]
    assert len(slots) == len(set(slots))  # no slot twice
    assert 5 <= len(slots) <= 7  # one per second


@pytest.mark.parametrize("mode", ["cluster"])
def test_killing_the_leader_hands_sweeping_to_the_other_node(cluster):
    first = cluster.node(**FAST)
    wait_for(lambda: leaders(first).get("scheduler") == first_id(first), 10, what="first node leading")
    second = cluster.node(**FAST)
    second.api("POST", "/api/v1/cron", json={"id": "tick", "spec": "*/1 * * * * *", "task_type": "tick", "json": {}})
    wait_for(lambda: len(tasks_of_type(second, "tick")) >= 2, 10, what="cron running")
    first.kill()
    killed_at = time.time()
    wait_for(lambda: leaders(second).get("scheduler") == first_id(second), 10, what="second node leading")
    taken_over = time.time() - killed_at
    # Slots keep firing: the newest task is at most ~2 ticks behind.
    time.sleep(2.5)
    newest = max(ts(t["enqueued_at"]) for t in tasks_of_type(second, "tick"))
    print(f"leadership moved {taken_over:.2f}s after SIGKILL")
    assert time.time() - newest < 2.5
    assert taken_over < 2 * 1.0 + 2 * FAST["node_heartbeat_interval"] + 1.0


def first_id(node):
    info = node.api("GET", "/api/v1/cluster")["nodes"]
    return next(n["id"] for n in info if n["port"] == int(node.url.rsplit(":", 1)[1]))


@pytest.mark.parametrize("mode", ["cluster"])
def test_tasks_of_a_killed_node_are_recovered_by_lease_expiry_on_the_survivor(cluster, pg_database):
    # Lease expiry is the backstop for a node no survivor can see die: one
    # of an earlier version, which records no liveness key (a node that
    # does is rescued at once: tests/e2e/test_node_death.py).
    doomed = cluster.node(lease_ttl=2, **FAST)
    survivor = cluster.node(lease_ttl=2, **FAST)
    stranded = cluster.worker(doomed, concurrency=2)
    stranded.wait_connected(doomed)
    ids = [doomed.enqueue(json={"sleep_first": 60}, retention=60)["id"] for _ in range(2)]
    wait_for(lambda: len(stranded.events()) == 2, 10, what="both tasks running on the doomed node")
    rescuer = cluster.worker(survivor, concurrency=2)
    rescuer.wait_connected(survivor, count=2)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("UPDATE conveyor_node SET liveness_key = NULL")
    doomed.kill()
    stranded.kill()
    # The survivor's reaper finds the expired leases and re-queues them.
    for task_id in ids:
        done = wait_for(lambda t=task_id: (x := survivor.task(t))["state"] == "completed" and x, 30, what="recovery")
        assert done["attempt"] == 2 and done["last_error"] == "lease expired"
    # Each ran once more, on the survivor: "exactly once in effect".
    assert sorted(e["task"] for e in rescuer.events() if e["event"] == "done") == sorted(ids)


def test_heartbeats_keep_a_task_longer_than_three_lease_ttls_alive(cluster):
    node = cluster.node(lease_ttl=2.5, **FAST)
    worker = cluster.worker(node)
    worker.wait_connected(node)
    task = node.enqueue(json={"sleep": 8}, retention=60)  # > 3 x TTL; kept once completed
    final = wait_state(node, task["id"], "completed", 30)
    assert final["attempt"] == 1
    assert [e["event"] for e in worker.events()] == ["start", "done"]


def test_scheduled_task_starts_on_time(cluster):
    node = cluster.node()
    worker = cluster.worker(node)
    worker.wait_connected(node)
    task = node.enqueue(json={}, process_in=2)
    assert task["state"] == "scheduled"
    start = wait_for(lambda: [e for e in worker.events() if e["event"] == "start"], 10, 0.01, what="start")[0]
    late = start["t"] - ts(task["due_at"])
    print(f"scheduled task started {late * 1000:.0f} ms after its time")
    assert -0.05 <= late < 1.5


def test_group_of_ten_arrives_as_one_batch(cluster):
    node = cluster.node()
    node.api(
        "PUT", "/api/v1/groups", json={"queue": "default", "group": "g1", "max_size": 10, "max_delay": 60, "grace": 30}
    )
    worker = cluster.worker(node, batch_types="report")
    worker.wait_connected(node)
    node.api(
        "POST",
        "/api/v1/tasks/batch",
        json={"tasks": [{"type": "report", "group": "g1", "json": {"n": i}, "retention": 60} for i in range(10)]},
    )
    wait_for(lambda: len(worker.events()) == 10, 15, what="batch delivery")
    assert {e["size"] for e in worker.events()} == {10}
    assert len({e["t"] for e in worker.events()}) <= 10
    ids = {e["task"] for e in worker.events()}
    for task_id in ids:
        wait_state(node, task_id, "completed")


def test_dependency_chain_runs_in_order(cluster):
    node = cluster.node()
    worker = cluster.worker(node, concurrency=4)
    worker.wait_connected(node)
    tasks = node.api(
        "POST",
        "/api/v1/tasks/tx",
        json={
            "tasks": [
                {"id": "chain-c", "type": "e2e", "json": {}, "depends_on": ["chain-b"], "retention": 60},
                {"id": "chain-b", "type": "e2e", "json": {"sleep": 0.2}, "depends_on": ["chain-a"]},
                {"id": "chain-a", "type": "e2e", "json": {"sleep": 0.2}},
            ]
        },
    )["tasks"]
    assert {t["id"]: t["state"] for t in tasks} == {"chain-a": "pending", "chain-b": "blocked", "chain-c": "blocked"}
    wait_state(node, "chain-c", "completed")
    order = [e["task"] for e in worker.events() if e["event"] == "start"]
    assert order == ["chain-a", "chain-b", "chain-c"]
    done = {e["task"]: e["t"] for e in worker.events() if e["event"] == "done"}
    starts = {e["task"]: e["t"] for e in worker.events() if e["event"] == "start"}
    assert starts["chain-b"] >= done["chain-a"] and starts["chain-c"] >= done["chain-b"]


def test_failed_dependency_with_cascade_cancels_the_rest(cluster):
    node = cluster.node()
    worker = cluster.worker(node)
    worker.wait_connected(node)
    node.api(
        "POST",
        "/api/v1/tasks/tx",
        json={
            "tasks": [
                {"id": "root", "type": "e2e", "json": {"skip": True}},
                {
                    "id": "mid",
                    "type": "e2e",
                    "json": {},
                    "depends_on": [{"task_id": "root", "on_failure": "cascade_cancel"}],
                },
                {
                    "id": "leaf",
                    "type": "e2e",
                    "json": {},
                    "depends_on": [{"task_id": "mid", "on_failure": "cascade_cancel"}],
                },
            ]
        },
    )
    wait_state(node, "root", "archived")
    for task_id in ("mid", "leaf"):
        final = wait_state(node, task_id, "canceled")
        assert final["last_error"] == "canceled by failed dependency"
    assert [e["task"] for e in worker.events() if e["event"] == "start"] == ["root"]
