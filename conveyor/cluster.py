"""Cluster bookkeeping: node and worker-session rows for the cluster view.

Not task state: each node writes its own rows (a heartbeat every few
seconds) and removes nodes that stopped beating.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from conveyor.models import Node as NodeRow
from conveyor.models import WorkerSession

STALE_AFTER = 15.0  # seconds without a heartbeat


def register_node(node_id: str, host: str, port: int, pid: int, version: str, now: datetime) -> None:
    NodeRow.objects.update_or_create(
        id=node_id,
        defaults={"host": host, "port": port, "pid": pid, "version": version, "seen_at": now},
        create_defaults={"host": host, "port": port, "pid": pid, "version": version, "seen_at": now, "started_at": now},
    )


def beat(node_id: str, now: datetime, leader_of: list[str], inflight: dict[str, int], port: int) -> None:
    """Refresh this node's row and its sessions' in-flight counts; drop dead nodes."""
    updated = NodeRow.objects.filter(id=node_id).update(seen_at=now, leader_of=leader_of, port=port)
    if not updated:
        NodeRow.objects.create(id=node_id, host="", port=port, started_at=now, seen_at=now, leader_of=leader_of)
    for session_id, count in inflight.items():
        WorkerSession.objects.filter(id=session_id).update(inflight=count)
    NodeRow.objects.filter(seen_at__lt=now - timedelta(seconds=STALE_AFTER)).delete()


def add_session(node_id: str, session_id: str, now: datetime, **fields: Any) -> None:
    WorkerSession.objects.update_or_create(id=session_id, defaults={"node_id": node_id, "connected_at": now, **fields})


def remove_session(session_id: str) -> None:
    WorkerSession.objects.filter(id=session_id).delete()


def remove_node(node_id: str) -> None:
    NodeRow.objects.filter(id=node_id).delete()
