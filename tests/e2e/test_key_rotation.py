"""Key rotation while the cluster works: ``keys rotate`` with a node running and workers draining.

Tasks are sealed under k1. The node is restarted with k2 first (k1 kept
to open old rows), workers drain the queue, and ``manage.py conveyor keys
rotate`` re-seals the table in small batches at the same time. At the end
every row is under k2, every task ran exactly once and completed with its
payload and result intact, and ``keys status`` says k1 holds nothing.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from conveyor.sdk.encryption import key_id_of
from tests.e2e.support import ROOT, wait_for

K1 = "k1:" + base64.b64encode(bytes([0x21]) * 32).decode()
K2 = "k2:" + base64.b64encode(bytes([0x22]) * 32).decode()
MARKER = "ROTATE-MARKER-9d2e"
TASKS = 400


def conveyor(env: dict[str, str], keys: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py conveyor ARGS`` as an operator runs it, with the keyring *keys*."""
    argv = [sys.executable, "manage.py", "conveyor", *args]
    return subprocess.run(
        argv, cwd=ROOT, env={**env, "CONVEYOR_ENCRYPTION_KEYS": keys}, capture_output=True, text=True, timeout=300
    )


def status(env: dict[str, str], keys: str) -> dict[str, Any]:
    done = conveyor(env, keys, "--json", "keys", "status")
    assert done.returncode == 0, done.stderr
    return {row["key"]: row["tasks"] for row in json.loads(done.stdout)["keys"]}


@pytest.mark.parametrize("mode", ["cluster"])
def test_rotation_while_workers_drain_leaves_every_row_under_the_new_key(cluster, pg_database):
    first = cluster.node(encryption_keys=K1)
    payload = {"sleep": 0.5, "echo": MARKER}  # a drain of 25 s on 8 slots: the rotation runs inside it
    ids = []
    for _ in range(TASKS // 100):
        batch = first.api("POST", "/api/v1/tasks/batch", json={"tasks": [{"type": "e2e", "json": payload,
                                                                           "retention": 3600}] * 100})  # fmt: skip
        ids += [item["task"]["id"] for item in batch["results"]]
    assert status(cluster.env, f"{K2},{K1}") == {"k2": 0, "k1": TASKS}
    first.stop()

    # The operator puts k2 first, keeps k1, restarts, and rotates while the queue drains.
    node = cluster.node(encryption_keys=f"{K2},{K1}")
    workers = [cluster.worker(node, concurrency=4, record_dsn=pg_database) for _ in range(2)]
    workers[0].wait_connected(node, count=2)
    wait_for(lambda: sum(1 for w in workers for e in w.events() if e["event"] == "done") >= 8, 30, what="draining")
    rotated = conveyor(cluster.env, f"{K2},{K1}", "keys", "rotate", "--batch", "20", "--pause", "0.02", "--wait", "0.2")
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    assert "held by running tasks" in rotated.stderr  # it met rows still running, and came back for them
    late = [node.enqueue(json=payload, retention=3600)["id"] for _ in range(5)]  # new rows: under k2 at once

    for task_id in ids + late:
        wait_for(lambda t=task_id: node.task(t)["state"] == "completed", 90, what=f"{task_id} to complete")
    left = conveyor(cluster.env, f"{K2},{K1}", "keys", "rotate")  # the rows completed after its last pass
    assert left.returncode == 0, left.stdout + left.stderr

    with psycopg.connect(pg_database) as conn:
        keys = dict(conn.execute("SELECT key_id, count(*) FROM conveyor_task GROUP BY key_id").fetchall())
        runs = conn.execute("SELECT count(*), count(DISTINCT task_id) FROM e2e_executions").fetchone()
        stored = conn.execute("SELECT payload, result FROM conveyor_task").fetchall()
    assert keys == {"k2": TASKS + len(late)}
    assert runs == (TASKS + len(late), TASKS + len(late))  # each task ran, once
    assert not any(MARKER.encode() in bytes(p) + bytes(r or b"") for p, r in stored)
    # Each value's own envelope names k2, the results of tasks that ran during the rotation too.
    assert {key_id_of(bytes(v)) for row in stored for v in row if v} == {"k2"}
    sample = node.task(ids[0])
    assert sample["json"] == payload and sample["result"]["echo"] == MARKER
    after = conveyor(cluster.env, f"{K2},{K1}", "keys", "status")
    assert status(cluster.env, f"{K2},{K1}") == {"k2": TASKS + len(late), "k1": 0}
    assert "key k1 holds no rows: it may be dropped" in after.stderr
