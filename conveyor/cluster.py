"""Cluster bookkeeping: node and worker-session rows for the cluster view.

Not task state: each node writes its own rows (a heartbeat every few
seconds) and removes nodes that stopped beating.

Each row also records the key of the node's liveness lock: on PostgreSQL a
node holds a session advisory lock on (``LIVENESS_NAMESPACE``, its key) for
as long as it runs (conveyor/dispatch/liveness.py), so the moment its
process dies PostgreSQL frees it, and a survivor that finds it free rescues
the node's leases (conveyor/sweepers/rescuer.py, docs/architecture.md,
"Node death").
"""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta
from typing import Any

from conveyor.models import Node as NodeRow
from conveyor.models import WorkerSession

STALE_AFTER = 15.0  # seconds without a heartbeat
LIVENESS_NAMESPACE = 0x6E6F6465  # "node": the first key of every node's liveness lock
# A node checks (and if need be takes again) its liveness lock this often
# (seconds); a survivor rescues a node only after finding its lock free for
# DEATH_CONFIRM seconds, so that a node whose lock connection merely dropped
# (a PostgreSQL restart, pg_terminate_backend) has taken it again by then.
LIVENESS_CHECK = 0.5
DEATH_CONFIRM = 3 * LIVENESS_CHECK


def liveness_key(node_id: str) -> int:
    """The second key of *node_id*'s liveness lock (31 bits: an int4, and an oid in pg_locks)."""
    return zlib.crc32(f"conveyor.node.{node_id}".encode()) & 0x7FFFFFFF


def register_node(node_id: str, host: str, port: int, pid: int, version: str, now: datetime) -> None:
    fields = {"host": host, "port": port, "pid": pid, "version": version, "seen_at": now}
    fields["liveness_key"] = liveness_key(node_id)
    NodeRow.objects.update_or_create(id=node_id, defaults=fields, create_defaults={**fields, "started_at": now})


def beat(
    node_id: str, now: datetime, leader_of: list[str], inflight: dict[str, int], port: int, queues: list[str]
) -> set[str]:
    """Refresh this node's row and its sessions' in-flight counts; drop dead nodes.

    Returns the queues other live nodes dispatch.
    """
    fields = {"seen_at": now, "leader_of": leader_of, "port": port, "queues": queues}
    if not NodeRow.objects.filter(id=node_id).update(**fields):
        NodeRow.objects.create(id=node_id, host="", started_at=now, liveness_key=liveness_key(node_id), **fields)
    for session_id, count in inflight.items():
        WorkerSession.objects.filter(id=session_id).update(inflight=count)
    NodeRow.objects.filter(seen_at__lt=now - timedelta(seconds=STALE_AFTER)).delete()
    others = NodeRow.objects.exclude(id=node_id).values_list("queues", flat=True)
    return {queue for served in others for queue in served or []}


def add_session(node_id: str, session_id: str, now: datetime, **fields: Any) -> None:
    WorkerSession.objects.update_or_create(id=session_id, defaults={"node_id": node_id, "connected_at": now, **fields})


def remove_session(session_id: str) -> None:
    WorkerSession.objects.filter(id=session_id).delete()


def remove_node(node_id: str, using: str = "default") -> None:
    NodeRow.objects.using(using).filter(id=node_id).delete()
