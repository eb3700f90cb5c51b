"""Encryption at rest end to end: every way in, read back out of the table with SQL.

A node with ``CONVEYOR_ENCRYPTION_KEYS`` takes tasks whose payloads carry a
marker through every path a task can come in by — REST (one, batch, tx),
Connect, Django code (alone and in the caller's transaction), django.tasks,
cron, a group, and a webhook delivery — and an error text and results that
carry it too. Then the table is read with SQL, not through Conveyor: no
stored byte contains the marker, and every row is under the key. Meanwhile
the handlers (an SDK worker, ``conveyor_worker``) and the webhook endpoint
were given the plaintext, and the API answers with it.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.django_tasks.support import start_worker
from tests.e2e.support import ROOT, wait_for
from tests.e2e.test_webhooks import Endpoint, register, wait_serving

MARKER = "MARKER-5f3a9c"
KEYS = "k1:" + base64.b64encode(bytes([0x11]) * 32).decode()
DONE = ("completed", "archived")


def echo() -> dict[str, Any]:
    return {"echo": MARKER}


def stored_values(env: dict[str, str]) -> list[tuple[str, str | None, bytes]]:
    """(table, key id, value) of every payload, result and error text, read with SQL."""
    url = env["DATABASE_URL"]
    queries = [
        ("conveyor_task", "SELECT key_id, payload, result, last_error FROM conveyor_task"),
        ("conveyor_cronentry", "SELECT key_id, payload FROM conveyor_cronentry"),
    ]
    out = []
    if url.startswith("sqlite:///"):
        conn: Any = sqlite3.connect(url[len("sqlite:///") :])
    else:
        conn = psycopg.connect(url)
    try:
        for table, query in queries:
            for key_id, *values in conn.execute(query).fetchall():
                for value in values:
                    if value is not None:
                        out.append((table, key_id, value.encode() if isinstance(value, str) else bytes(value)))
    finally:
        conn.close()
    return out


def produce_from_django(env: dict[str, str]) -> dict[str, str]:
    argv = [sys.executable, str(ROOT / "tests" / "e2e" / "encryption_producer.py"), MARKER]
    env = {**env, "DJANGO_SETTINGS_MODULE": "tests.django_tasks.settings"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_path_stores_no_plaintext_byte_and_every_reader_gets_plaintext(cluster, mode, tmp_path: Path):
    settings = {"encryption_keys": KEYS, "completed_retention": "1h", "dispatch_self_check": 0.5}
    node = cluster.node(**settings)
    env = {**cluster.env, **{f"CONVEYOR_{k.upper()}": str(v) for k, v in settings.items()}}
    worker = cluster.worker(node, queues="default=1,crons=1,grouped=1", batch_types="grouped", concurrency=8)
    worker.wait_connected(node)
    django_worker = start_worker(node, {**env, "PYTHONPATH": str(ROOT)}, queues="sealed=1")
    endpoint = Endpoint(tmp_path, node.url)
    try:
        register(node, endpoint.url, queues={"hooks": 1})
        wait_serving(node)
        ids = enqueue_through_every_path(node, env)
        for task_id in ids.values():
            wait_for(lambda task_id=task_id: node.task(task_id)["state"] in DONE, 60, what=f"{task_id} to finish")
        cron_runs = wait_for(
            lambda: [t for t in node.api("GET", "/api/v1/tasks", params={"queue": "crons"})["tasks"]
                     if t["state"] == "completed"],
            30, what="a cron run to complete",
        )  # fmt: skip

        # The readers were given the plaintext.
        tasks = {name: node.task(task_id) for name, task_id in ids.items()}
        assert {name: t["state"] for name, t in tasks.items()} == dict.fromkeys(ids, "completed")
        seen = [e["payload"] for e in worker.events() if e["event"] in ("start", "batch")]
        assert sum(MARKER in p for p in seen) >= len([n for n in ids if n not in ("webhook", "django_tasks")])
        assert any(MARKER in e.get("payload", "") for e in endpoint.events("execute"))
        assert tasks["django_tasks"]["result"] is not None and MARKER in json.dumps(tasks["django_tasks"]["result"])
        for name in ("rest", "connect", "batch", "tx", "django", "django_tx"):
            assert tasks[name]["json"] == echo() and tasks[name]["result"]["echo"] == MARKER, name
        assert tasks["group_a"]["json"] == tasks["group_b"]["json"] == echo()
        for name, task in tasks.items():
            assert task["encryption"] == {"at_rest": "k1", "end_to_end": None, "error": None}, name
        assert tasks["failed_once"]["last_error"] == f"RuntimeError: declined {MARKER}"
        assert cron_runs[0]["json"] == echo()

        # The table holds none of it.
        values = stored_values(env)
        task_rows = {v for t, _, v in values if t == "conveyor_task"}
        assert len(task_rows) >= 2 * len(ids)  # (not vacuous: payloads and results are there)
        assert [v for _, _, v in values if MARKER.encode() in v] == []
        assert {k for _, k, _ in values} == {"k1"}
    finally:
        endpoint.kill()
        django_worker.kill()


def enqueue_through_every_path(node: Any, env: dict[str, str]) -> dict[str, str]:
    payload = echo()
    ids = {"rest": node.enqueue(json=payload)["id"]}
    connect = node.http.post(
        "/conveyor.v1.TaskService/Enqueue",
        json={"type": "e2e", "payload": base64.b64encode(json.dumps(payload).encode()).decode(),
              "contentType": "application/json"},
    )  # fmt: skip
    assert connect.status_code == 200, connect.text
    ids["connect"] = connect.json()["task"]["id"]
    batch = node.api("POST", "/api/v1/tasks/batch", json={"tasks": [{"type": "e2e", "json": payload}] * 2})
    ids["batch"] = batch["results"][1]["task"]["id"]
    ids["tx"] = node.api("POST", "/api/v1/tasks/tx", json={"tasks": [{"type": "e2e", "json": payload}]})["tasks"][0][
        "id"
    ]
    ids["failed_once"] = node.enqueue(
        json={"fail_with": f"declined {MARKER}"}, retry_policy={"kind": "fixed", "base": 0.2}
    )["id"]
    ids.update(produce_from_django(env))
    node.api(
        "PUT", "/api/v1/groups", json={"queue": "grouped", "group": "g", "max_size": 2, "max_delay": 60, "grace": 30}
    )
    ids["group_a"] = node.enqueue(type="grouped", queue="grouped", group="g", json=payload)["id"]
    ids["group_b"] = node.enqueue(type="grouped", queue="grouped", group="g", json=payload)["id"]
    ids["webhook"] = node.enqueue(queue="hooks", json={"marker": MARKER})["id"]
    node.api("POST", "/api/v1/cron", json={"id": "sealed", "spec": "* * * * * *", "task_type": "e2e", "queue": "crons",
                                           "json": payload})  # fmt: skip
    return ids
