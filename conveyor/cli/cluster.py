"""``conveyor cluster info``: nodes, the sweepers each leads, worker sessions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker
from conveyor.cli.common import group, verb, when
from conveyor.cluster import STALE_AFTER
from conveyor.models import Node, WorkerSession


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "cluster", "the running cluster")
    verb(verbs, "info", info, "broker, nodes (with the sweepers each leads) and connected workers", changes=False)


def info(args: Any, out: Any) -> None:
    broker_info = get_broker().info()
    now = broker_info["time"]
    nodes = list(Node.objects.order_by("started_at"))
    sessions = list(WorkerSession.objects.order_by("connected_at"))
    if out.as_json:
        out.emit(cluster_json(broker_info, nodes, sessions, now), "")
        return
    out.line(
        f"conveyor {broker_info['version']}, {broker_info['driver']} database {broker_info['database']}, "
        f"time {when(now)} UTC"
    )
    out.line("")
    out.line("Nodes")
    out.table(
        [
            {
                "node": n.id,
                "address": f"{n.host}:{n.port}",
                "pid": n.pid,
                "version": n.version,
                "started": when(n.started_at),
                "seen": when(n.seen_at),
                "status": status(n, now),
                "leader_of": sorted(n.leader_of or []),
            }
            for n in nodes
        ],
        ["node", "address", "pid", "version", "started", "seen", "status", "leader_of"],
    )
    out.line("")
    out.line("Worker sessions")
    out.table(
        [
            {
                "session": s.id,
                "node": s.node_id,
                "queues": s.queues,
                "concurrency": s.concurrency,
                "inflight": s.inflight,
                "sdk": s.sdk_version,
                "remote": s.remote,
                "connected": when(s.connected_at),
            }
            for s in sessions
        ],
        ["session", "node", "queues", "concurrency", "inflight", "sdk", "remote", "connected"],
    )


def status(node: Node, now: Any) -> str:
    """``live`` while the node heartbeats; ``stale`` rows await removal by a live node."""
    return "live" if now - node.seen_at <= timedelta(seconds=STALE_AFTER) else "stale"


def cluster_json(
    broker_info: dict[str, Any], nodes: list[Node], sessions: list[WorkerSession], now: Any
) -> dict[str, Any]:
    by_node: dict[str, list[dict[str, Any]]] = {}
    for s in sessions:
        by_node.setdefault(s.node_id, []).append(
            {
                "id": s.id,
                "node": s.node_id,
                "queues": s.queues,
                "concurrency": s.concurrency,
                "inflight": s.inflight,
                "labels": s.labels,
                "sdk_version": s.sdk_version,
                "remote": s.remote,
                "connected_at": render.ts(s.connected_at),
            }
        )
    return {
        "info": {**broker_info, "time": render.ts(now)},
        "nodes": [
            {
                "id": n.id,
                "host": n.host,
                "port": n.port,
                "pid": n.pid,
                "version": n.version,
                "started_at": render.ts(n.started_at),
                "seen_at": render.ts(n.seen_at),
                "status": status(n, now),
                "leader_of": n.leader_of,
                "sessions": by_node.get(n.id, []),
            }
            for n in nodes
        ],
    }
