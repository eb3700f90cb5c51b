"""Rescuer: give back at once the leases of nodes that died (docs/architecture.md, "Node death")."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor import cluster
from conveyor.sweepers.base import Sweeper

if TYPE_CHECKING:
    from conveyor.broker import Broker


class Rescuer(Sweeper):
    """A node whose liveness lock stays free for ``DEATH_CONFIRM`` seconds is dead.

    The lock of a live node is free only while its lock connection
    reconnects (it checks it every ``LIVENESS_CHECK``): waiting that long
    before acting keeps a slow or reconnecting node from being rescued. A
    node found free is remembered from pass to pass, by this leader only.
    """

    name = "rescuer"
    interval_setting = "NODE_RESCUE_INTERVAL"

    def __init__(self, broker: Broker, node: Any = None) -> None:
        super().__init__(broker, node)
        self.free_since: dict[str, datetime] = {}

    def run_once(self) -> dict[str, int]:
        now = self.broker.now()
        alive = getattr(self.node, "id", "")
        free = self.broker.dead_nodes(alive)
        self.free_since = {node_id: self.free_since.get(node_id, now) for node_id in free}
        dead = [n for n, since in self.free_since.items() if (now - since).total_seconds() >= cluster.DEATH_CONFIRM]
        report = {"nodes_rescued": 0, "released": 0}
        for node_id in dead:
            released = self.broker.rescue_node(node_id)
            # Its row (and its sessions') go too: the cluster view shows it gone.
            cluster.remove_node(node_id, using=self.broker.db)
            del self.free_since[node_id]
            report["nodes_rescued"] += 1
            report["released"] += len(released)
        return report
