"""The CLI as a real process, beside a real dev node on the same database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT, NodeProcess, wait_for


def cli_env(database: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="conveyor_site.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        DATABASE_URL=f"sqlite:///{database}",
    )
    return env


def conveyor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "manage.py", "conveyor", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_cli_process_against_a_running_dev_node_and_its_exit_codes(tmp_path):
    env = cli_env(tmp_path / "db.sqlite3")

    # Before any node migrated the database: one line on stderr, exit 1.
    unmigrated = conveyor(env, "stats")
    assert unmigrated.returncode == 1
    assert unmigrated.stderr.strip().startswith("CommandError: database error: no such table")
    assert len(unmigrated.stderr.strip().splitlines()) == 1

    node = NodeProcess(env, dev=True)
    try:
        # CLI -> database -> the node's HTTP API.
        enqueued = conveyor(env, "--json", "enqueue", "cli:hello", "--queue", "cli", "--json-payload", '{"n": 1}')
        assert enqueued.returncode == 0, enqueued.stderr
        task_id = json.loads(enqueued.stdout)["id"]
        seen = node.task(task_id)
        assert (seen["type"], seen["queue"], seen["json"]) == ("cli:hello", "cli", {"n": 1})

        # The node's HTTP API -> database -> the CLI.
        posted = node.enqueue(type="api:hello", queue="cli", process_in="1h")
        shown = conveyor(env, "tasks", "get", posted["id"])
        assert shown.returncode == 0, shown.stderr
        assert ["state", "scheduled"] in [line.split() for line in shown.stdout.splitlines()]

        # The node registers itself; the CLI sees it in the cluster view.
        def listed() -> list[dict]:
            return json.loads(conveyor(env, "--json", "cluster", "info").stdout)["nodes"]

        nodes = wait_for(listed, timeout=30, interval=0.5, what="the node in cluster info")
        assert nodes[0]["status"] == "live"

        # Bad input: exit 1, one line naming the flag, nothing stored.
        bad = conveyor(env, "enqueue", "x", "--queue", "cli", "--process-in", "soon")
        assert bad.returncode == 1
        assert bad.stderr.strip() == "CommandError: --process-in: invalid duration 'soon'; use e.g. 30s, 5m, 2h, 7d"
        assert len(node.api("GET", "/api/v1/tasks", params={"queue": "cli"})["tasks"]) == 2
    finally:
        node.stop()
