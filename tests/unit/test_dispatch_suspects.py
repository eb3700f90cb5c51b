"""A dispatcher places a crash's suspects one per gateway (conveyor/broker/crashes.py)."""

from __future__ import annotations

from conveyor.dispatch.dispatcher import QueueDispatcher, Slot
from conveyor.dispatch.node import Node
from conveyor.models import Task
from tests.unit.test_gateway_leases import NOW, RecordingGateway


def task(n: int, *, suspect: bool = False) -> Task:
    return Task(id=f"T{n}", queue="q", type="t", state="active", payload=b"", lease_id=f"L{n}", due_at=NOW,
                suspect=suspect)  # fmt: skip


def dispatcher_with(node: Node, *credits: int) -> tuple[QueueDispatcher, list[RecordingGateway]]:
    dispatcher = QueueDispatcher(node, "q")
    gateways = [RecordingGateway(node, f"g{i}") for i in range(len(credits))]
    for gateway, credit in zip(gateways, credits, strict=True):
        dispatcher.slots[gateway.key] = Slot(gateway, 1, credit)
    return dispatcher, gateways


def suspects_on(gateway: RecordingGateway) -> list[str]:
    return [tid for tid, record in gateway.inflight.items() if record.task.suspect]


def test_two_suspects_leased_together_go_to_two_gateways():
    dispatcher, (first, second) = dispatcher_with(Node(dev=True), 4, 4)

    dispatcher._distribute(
        [task(1, suspect=True), task(2), task(3, suspect=True), task(4)]
    )  # round-robin: 1, 3 together

    assert len(suspects_on(first)) == len(suspects_on(second)) == 1
    assert len(first.inflight) + len(second.inflight) == 4


def test_a_gateway_holding_a_suspect_gets_no_second_one_but_still_gets_other_tasks():
    dispatcher, (busy, free) = dispatcher_with(Node(dev=True), 4, 1)
    busy.deliver("q", [task(0, suspect=True)])

    dispatcher._distribute([task(1, suspect=True), task(2), task(3)])

    assert suspects_on(busy) == ["T0"] and suspects_on(free) == ["T1"]
    assert sorted(busy.inflight) == ["T0", "T2", "T3"]


def test_tasks_that_are_not_suspects_are_spread_as_before():
    dispatcher, (first, second) = dispatcher_with(Node(dev=True), 2, 2)
    first.deliver("q", [task(0, suspect=True)])

    dispatcher._distribute([task(n) for n in range(1, 5)])

    assert (len(first.inflight), len(second.inflight)) == (3, 2)
