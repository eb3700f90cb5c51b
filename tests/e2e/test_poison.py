"""A poison task (its handler kills the worker process) among innocent tasks.

Real SDK worker processes, kept running by a supervisor that starts a new
one whenever one dies. The innocent tasks have ``max_retry`` 3, as in the
fault-injection run that found innocent tasks dead-lettered "retries
exhausted: worker connection lost" (issue 22 item 2). Each test runs on a
dev node and on a PostgreSQL + Redis node.
"""

from __future__ import annotations

import itertools

from tests.e2e.support import Supervisor, max_overlap, read_events, wait_for

INNOCENTS = 400
POISON_RETRIES = 3
BACKOFF = 1.0  # s, the poison's fixed retry delay


def test_a_task_that_kills_its_worker_dead_letters_no_innocent_task_and_backs_off(cluster):
    node = cluster.node()
    workers = Supervisor(cluster, node, 2, concurrency=8)
    for worker in workers.running:
        worker.wait_connected(node, count=2)
    innocent = {"type": "e2e", "json": {"sleep": 0.2}, "max_retry": 3, "retention": "1h"}
    poison = {
        "type": "e2e",
        "json": {"exit": True},
        "max_retry": POISON_RETRIES,
        "retry_policy": {"kind": "fixed", "base": f"{BACKOFF}s"},
    }
    # The poison among the last quarter: innocents run beside it and after it.
    specs = [innocent] * (INNOCENTS * 3 // 4) + [poison] + [innocent] * (INNOCENTS // 4)
    stored = node.api("POST", "/api/v1/tasks/batch", json={"tasks": specs})["results"]
    ids = [r["task"]["id"] for r in stored]
    poison_id = ids[INNOCENTS * 3 // 4]

    def settled() -> list[dict] | None:
        workers.check()
        tasks = node.api("GET", "/api/v1/tasks", params={"limit": 1000})["tasks"]
        done = len(tasks) == len(ids) and all(t["state"] in ("completed", "archived") for t in tasks)
        return tasks if done else None

    tasks = wait_for(settled, 180, 0.5, what="every task completed or archived")

    final = {t["id"]: t for t in tasks}
    innocents = [t for t in tasks if t["id"] != poison_id]
    archived = [(t["id"], t["retried"], t["last_error"]) for t in innocents if t["state"] == "archived"]
    charged = [(t["id"], t["retried"]) for t in innocents if t["retried"]]
    starts = sorted(e["t"] for e in read_events(cluster.logs()) if e["task"] == poison_id and e["event"] == "start")
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(starts)]
    print(f"{workers.restarts} worker crashes; poison started {len(starts)} times, gaps {gaps} s")
    assert archived == [], f"{len(archived)} innocent tasks archived: {archived[:5]}"
    assert charged == [], f"{len(charged)} innocent tasks charged an attempt: {charged[:5]}"
    assert len(innocents) == INNOCENTS and all(t["state"] == "completed" for t in innocents)
    assert final[poison_id]["state"] == "archived"
    assert final[poison_id]["retried"] == POISON_RETRIES
    assert final[poison_id]["last_error"] == "retries exhausted: worker connection lost"
    # Each crash it caused counted once it was named, and each retry waited its backoff.
    assert len(starts) >= POISON_RETRIES + 1
    assert all(gap >= BACKOFF for gap in gaps), gaps


def test_the_tasks_of_a_killed_worker_run_again_one_suspect_per_worker_with_no_attempt_spent(cluster):
    node = cluster.node(lease_ttl=120)
    first = cluster.worker(node, concurrency=3)
    first.wait_connected(node)
    held = {"type": "e2e", "json": {"sleep": 0.5}, "retry_policy": {"kind": "fixed", "base": "200ms"}}
    ids = [r["task"]["id"] for r in node.api("POST", "/api/v1/tasks/batch", json={"tasks": [held] * 3})["results"]]
    wait_for(lambda: len([e for e in first.events() if e["event"] == "start"]) == 3, 20, what="three starts")
    first.kill()  # three tasks in flight: nobody is named, each becomes a suspect
    second = cluster.worker(node, concurrency=3)
    second.wait_connected(node)
    fresh = node.enqueue(json={"sleep": 0.5, "key": "fresh"})["id"]

    wait_for(lambda: all(node.task(i)["state"] == "completed" for i in [*ids, fresh]), 60, what="all completed")

    runs = [e for e in second.events() if e["task"] in ids]
    overlap = max_overlap(runs, key=lambda e: "suspect")["suspect"]
    print(f"suspects ran {overlap} at a time on a worker with 3 slots")
    assert overlap == 1
    assert [node.task(i)["retried"] for i in ids] == [0, 0, 0]
    # A task that was in no crash is not held back by the suspect beside it.
    assert max_overlap(second.events(), key=lambda e: "all")["all"] >= 2
