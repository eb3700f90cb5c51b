"""``conveyor cluster info``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor import cluster
from tests.cli.support import run

pytestmark = pytest.mark.django_db(transaction=True)


def add_nodes() -> datetime:
    now = datetime.now(UTC)
    cluster.register_node("node-a", "10.0.0.1", 8080, 111, "0.1.0", now - timedelta(minutes=5))
    cluster.beat("node-a", now, ["reaper", "scheduler"], {}, 8080, ["default"])
    cluster.register_node("node-b", "10.0.0.2", 8080, 222, "0.1.0", now - timedelta(minutes=1))
    cluster.add_session(
        "node-a", "sess-1", now, queues={"mail": 2}, concurrency=8, sdk_version="py/0.1", remote="10.0.1.5"
    )
    return now


def test_cluster_info_lists_nodes_leaders_and_sessions():
    add_nodes()

    lines = run("cluster", "info").lines()

    assert lines[0].startswith("conveyor 0.1.0, sqlite database ")
    assert lines[2] == "Nodes"
    assert lines[3].split() == ["NODE", "ADDRESS", "PID", "VERSION", "STARTED", "SEEN", "STATUS", "LEADER_OF"]
    node_a, node_b = lines[4].split(), lines[5].split()
    assert node_a[:4] == ["node-a", "10.0.0.1:8080", "111", "0.1.0"]
    assert node_a[-2:] == ["live", "reaper,scheduler"]
    # node-b last beat a minute ago: past the staleness window, awaiting removal.
    assert node_b[0] == "node-b" and node_b[-2:] == ["stale", "-"]
    assert lines[7] == "Worker sessions"
    session = lines[9].split()
    assert session[:7] == ["sess-1", "node-a", "mail=2", "8", "0", "py/0.1", "10.0.1.5"]


def test_cluster_info_json():
    add_nodes()

    data = run("--json", "cluster", "info").json()

    assert data["info"]["driver"] == "sqlite"
    assert [(n["id"], n["status"], n["leader_of"]) for n in data["nodes"]] == [
        ("node-a", "live", ["reaper", "scheduler"]),
        ("node-b", "stale", []),
    ]
    assert [s["id"] for s in data["nodes"][0]["sessions"]] == ["sess-1"]


def test_cluster_info_with_no_nodes_says_none():
    lines = run("cluster", "info").lines()

    assert lines[3] == "(none)" and lines[6] == "(none)"
