"""Node death: the leases of a node PostgreSQL saw die, given back at once.

A node that dies takes its workers' connections with it; nobody is left to
settle the tasks it had delivered, or taken through its offers, and they
would wait for their leases to expire. Each node holds a liveness lock
while it runs (conveyor/dispatch/liveness.py) that PostgreSQL frees the
moment the node's process is gone; the leader's rescuer
(conveyor/sweepers/rescuer.py) finds it free and calls ``rescue_node``.

A node's death says nothing against the tasks it held: a node runs no
handler code, and crash attribution (conveyor/broker/crashes.py) exists to
find a task that kills *worker* processes. So every task the node held is
released where it stood in line: ``pending``, its due time kept, no
attempt charged, no suspect mark; the attempt is recorded ``released``
(error ``node lost``). A worker that was running one has stopped it (its
connection is gone) or finishes it with no session to report on: the task
runs again, which at-least-once delivery allows. See docs/architecture.md,
"Node death", and docs/decisions.md.

A webhook endpoint that accepted a task (an asynchronous delivery) goes on
working whatever becomes of the node that delivered it, and its callbacks
reach any node: the lease is handed over to the endpoint (``hand_over``),
so a rescue of that node leaves it alone, and lease expiry reclaims it if
the endpoint goes silent.
"""

from __future__ import annotations

from conveyor.broker.attempts import record_attempts
from conveyor.broker.base import Context
from conveyor.broker.outcomes import Outcomes

NODE_LOST = "node lost"


def endpoint_holder(registration: str) -> str:
    """The lease holder of a task a webhook endpoint accepted: no node's id."""
    return f"webhook:{registration}"


class Nodes:
    """Dead nodes: find them, give back what they held; webhook endpoints' leases."""

    def __init__(self, ctx: Context, outcomes: Outcomes) -> None:
        self.ctx = ctx
        self.outcomes = outcomes  # a dead node's leases are released (one canceled meanwhile is archived)

    def dead_nodes(self, alive: str = "") -> list[str]:
        """The nodes, *alive* (the caller's own) aside, whose liveness lock is free
        (always none on SQLite: one embedded node)."""
        return self.ctx.store.dead_nodes(alive)

    def rescue_node(self, node_id: str) -> list[str]:
        """Release every lease of dead node *node_id* in place; return the task ids.

        Its open offers go first: the DELETE waits for an INSERT taking one
        to commit, and none can be taken after it, so the leases read next
        are all the node will ever hold. A task an operator canceled while
        the node held it is archived, as any release of it would.
        """
        self.ctx.store.withdraw_offers_of(node_id)
        refs = self.ctx.store.leases_held_by(node_id)
        if not refs:
            return []
        now = self.ctx.now()
        with self.ctx.atomic():
            rows = self.ctx.store.lock_active(dict(refs))
            record_attempts(self.ctx.store, rows, "released", now, None, NODE_LOST)
            self.outcomes.release_rows(rows, now, in_place=True)
        return [r.id for r in rows]

    def hand_over(self, task_id: str, lease_id: str, registration: str) -> bool:
        """The endpoint of webhook *registration* accepted this task: its lease
        is the endpoint's now, not its node's. Whether the lease still held."""
        return self.ctx.store.hand_over(task_id, lease_id, endpoint_holder(registration))
