"""A node's logs on request: JSON lines (CONVEYOR_LOG_FORMAT=json) and an HTTP access log."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.e2e.conftest import base_env
from tests.e2e.support import NodeProcess, wait_for


def json_lines(node: NodeProcess) -> list[dict[str, object]]:
    out = []
    for line in node.lines:
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_a_node_logs_json_with_its_id_and_an_access_record_per_request(tmp_path: Path) -> None:
    env = {**base_env(), "DATABASE_URL": f"sqlite:///{tmp_path}/conveyor.sqlite3",
           "CONVEYOR_LOG_FORMAT": "json", "CONVEYOR_ACCESS_LOG": "1"}  # fmt: skip
    node = NodeProcess(env, dev=True, name="json-node")
    try:
        assert httpx.get(node.url + "/healthz", timeout=10).status_code == 200
        httpx.post(node.url + "/api/v1/tasks", json={"type": "x", "queue": "logs"}, timeout=10)

        def access() -> list[dict[str, object]]:
            return [r for r in json_lines(node) if r.get("logger") == "conveyor.access"]

        records = wait_for(lambda: len(access()) >= 2 and access(), timeout=10, what="two access records")
        health = next(r for r in records if r["path"] == "/healthz")
        assert (health["method"], health["status"], health["level"]) == ("GET", 200, "INFO")
        assert isinstance(health["duration_ms"], float) and health["client"] == "127.0.0.1"
        assert str(health["node"]).count("-") >= 2  # hostname-pid-token
        assert any(r["path"] == "/api/v1/tasks" and r["status"] == 201 for r in records)  # the fast path too
        started = [r for r in json_lines(node) if str(r.get("message", "")).startswith("node ")]
        assert started and started[0]["logger"] == "conveyor.node"
    finally:
        node.stop()
