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


def beat(
    node_id: str, now: datetime, leader_of: list[str], inflight: dict[str, int], port: int, queues: list[str]
) -> set[str]:
    """Refresh this node's row and its sessions' in-flight counts; drop dead nodes.

    Returns the queues other live nodes dispatch.
    """
    fields = {"seen_at": now, "leader_of": leader_of, "port": port, "queues": queues}
    if not NodeRow.objects.filter(id=node_id).update(**fields):
        NodeRow.objects.create(id=node_id, host="", started_at=now, **fields)
    for session_id, count in inflight.items():
        WorkerSession.objects.filter(id=session_id).update(inflight=count)
    NodeRow.objects.filter(seen_at__lt=now - timedelta(seconds=STALE_AFTER)).delete()
    others = NodeRow.objects.exclude(id=node_id).values_list("queues", flat=True)
    return {queue for served in others for queue in served or []}


def add_session(node_id: str, session_id: str, now: datetime, **fields: Any) -> None:
    WorkerSession.objects.update_or_create(id=session_id, defaults={"node_id": node_id, "connected_at": now, **fields})


def remove_session(session_id: str) -> None:
    WorkerSession.objects.filter(id=session_id).delete()


def remove_node(node_id: str) -> None:
    NodeRow.objects.filter(id=node_id).delete()
