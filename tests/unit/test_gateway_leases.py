"""The node's task -> gateway map, which cancel requests follow to the delivery they stop."""

from __future__ import annotations

from datetime import UTC, datetime

from conveyor.dispatch.gateway import Gateway
from conveyor.dispatch.node import Node
from conveyor.models import Task

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TASK_ID = "01KX3CAWA7WMGN3R5EA7JJCFA0"


class RecordingGateway(Gateway):
    """A gateway whose worker is a list of the frames it would have been sent."""

    def __init__(self, node: Node, key: str) -> None:
        super().__init__(node, key, {"q": 1}, 1, [])
        self.sent: list[tuple[str, str]] = []

    def push_tasks(self, queue: str, tasks: list[Task]) -> None:
        self.sent += [("dispatch", t.lease_id or "") for t in tasks]

    def push_cancel(self, task_id: str, lease_id: str, reason: str) -> None:
        self.sent.append(("cancel", lease_id))


def leased(lease_id: str) -> Task:
    return Task(id=TASK_ID, queue="q", type="t", state="active", payload=b"", lease_id=lease_id, due_at=NOW)


def test_letting_go_of_an_old_delivery_leaves_the_new_one_reachable():
    # The first lease was lost (the reaper, or a lease commit undone by a
    # database crash) and the task was leased again to another worker on
    # this node while the first still held it.
    node = Node(dev=True)
    first, second = RecordingGateway(node, "first"), RecordingGateway(node, "second")
    first.deliver("q", [leased("L1")])
    second.deliver("q", [leased("L2")])

    first.lose(TASK_ID, "lease lost")

    assert node.leases[TASK_ID] is second
    assert first.sent == [("dispatch", "L1"), ("cancel", "L1")]


def test_a_delivery_that_ends_removes_its_own_entry():
    node = Node(dev=True)
    gateway = RecordingGateway(node, "only")
    gateway.deliver("q", [leased("L1")])

    gateway.lose(TASK_ID, "lease lost")

    assert TASK_ID not in node.leases


def test_taking_back_everything_keeps_entries_other_gateways_hold():
    node = Node(dev=True)
    first, second = RecordingGateway(node, "first"), RecordingGateway(node, "second")
    first.deliver("q", [leased("L1")])
    second.deliver("q", [leased("L2")])

    assert first._take_all() == [(TASK_ID, "L1")]
    assert node.leases[TASK_ID] is second
