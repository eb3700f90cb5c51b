"""Node death: the leases of a node PostgreSQL saw die, settled at once as a crash.

A node that dies takes its workers' connections with it; nobody is left to
settle the tasks it had delivered, or taken through its offers, and they
would wait for their leases to expire. Each node holds a liveness lock
while it runs (conveyor/dispatch/liveness.py) that PostgreSQL frees the
moment the node's process is gone; the leader's rescuer
(conveyor/sweepers/rescuer.py) finds it free and calls ``rescue_node``.

The node's tasks are settled as one worker crash with all of them in
flight (conveyor/broker/crashes.py): which worker held which is known only
to the dead node. So a lone task is charged an attempt, several become
suspects with their attempt not counted, and a suspect among them is
charged. See docs/architecture.md, "Node death".

A webhook endpoint that accepted a task (an asynchronous delivery) goes on
working whatever becomes of the node that delivered it, and its callbacks
reach any node: the lease is handed over to the endpoint (``hand_over``),
so a rescue of that node leaves it alone, and lease expiry reclaims it if
the endpoint goes silent.
"""

from __future__ import annotations

from conveyor.broker.base import Context
from conveyor.broker.crashes import Crashes, CrashReport

NODE_LOST = "node lost"


def endpoint_holder(registration: str) -> str:
    """The lease holder of a task a webhook endpoint accepted: no node's id."""
    return f"webhook:{registration}"


class Nodes:
    """Dead nodes: find them, settle what they held; webhook endpoints' leases."""

    def __init__(self, ctx: Context, crashes: Crashes) -> None:
        self.ctx = ctx
        self.crashes = crashes  # a dead node's leases are settled as one crash

    def dead_nodes(self, alive: str = "") -> list[str]:
        """The nodes, *alive* (the caller's own) aside, whose liveness lock is free
        (always none on SQLite: one embedded node)."""
        return self.ctx.store.dead_nodes(alive)

    def rescue_node(self, node_id: str) -> CrashReport:
        """Settle every lease of dead node *node_id* as one crash.

        Its open offers go first: the DELETE waits for an INSERT taking one
        to commit, and none can be taken after it, so the leases read next
        are all the node will ever hold.
        """
        self.ctx.store.withdraw_offers_of(node_id)
        return self.crashes.settle_crash(self.ctx.store.leases_held_by(node_id), error=NODE_LOST)

    def hand_over(self, task_id: str, lease_id: str, registration: str) -> bool:
        """The endpoint of webhook *registration* accepted this task: its lease
        is the endpoint's now, not its node's. Whether the lease still held."""
        return self.ctx.store.hand_over(task_id, lease_id, endpoint_holder(registration))
