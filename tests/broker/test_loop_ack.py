"""Acks on the event loop (``Broker.ack_on`` through ``LoopLeaser.ack``) against real PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from conveyor.broker import Dependency
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.states import State
from tests.broker.factories import enqueue, on_loop, own_sessions, reload

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


class LoopHooks:
    """Records what an ack hands on; touches no database (it runs on the loop)."""

    wants_events = True

    def __init__(self) -> None:
        self.resolved: list[str] = []
        self.woken: list[str] = []
        self.events: list = []

    def resolve(self, broker, task_ids):
        self.resolved += task_ids

    def wake(self, queues, at=None):
        self.woken += queues

    def publish(self, events):
        self.events += events


def _ack(broker, items):
    return on_loop(LoopLeaser(broker), lambda leaser: leaser.ack(items))


def test_completes_each_stores_results_and_reports_lost_leases(broker, clock):
    for _ in range(3):
        enqueue(broker)
    a, b, c = broker.lease("default", 3).tasks
    broker.release(c.id, c.lease_id)
    clock.advance(2)
    broker.hooks = hooks = LoopHooks()

    lost = _ack(broker, [(a, b"ra"), (b, None), (c, b"rc")])

    assert lost == [c.id]
    assert (reload(broker, a.id).state, bytes(reload(broker, a.id).result)) == (State.COMPLETED, b"ra")
    assert (reload(broker, b.id).state, reload(broker, b.id).result) == (State.COMPLETED, None)
    assert reload(broker, b.id).finished_at == clock.now()
    assert reload(broker, c.id).state == State.PENDING
    assert (a.state, b.state, c.state) == (State.COMPLETED, State.COMPLETED, State.ACTIVE)
    assert sorted((e.kind, e.task_id) for e in hooks.events) == sorted([("completed", a.id), ("completed", b.id)])


def test_each_task_must_carry_its_own_lease(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    a_forged, b_forged = broker.get_task(a.id), broker.get_task(b.id)
    a_forged.lease_id, b_forged.lease_id = b.lease_id, a.lease_id  # each with the other's lease
    broker.hooks = LoopHooks()

    lost = _ack(broker, [(a_forged, None), (b_forged, None)])

    assert sorted(lost) == sorted([a.id, b.id])
    assert {reload(broker, a.id).state, reload(broker, b.id).state} == {State.ACTIVE}


def test_repeating_an_ack_changes_nothing_and_reports_every_lease_lost(broker):
    for _ in range(2):
        enqueue(broker)
    tasks = broker.lease("default", 2).tasks
    broker.hooks = hooks = LoopHooks()
    assert _ack(broker, [(t, None) for t in tasks]) == []

    again = [(broker.get_task(t.id), b"again") for t in tasks]
    for (task, _), leased in zip(again, tasks, strict=True):
        task.lease_id = leased.lease_id
    lost = _ack(broker, again)

    assert sorted(lost) == sorted(t.id for t in tasks)
    assert all(reload(broker, t.id).result is None for t in tasks)
    assert len(hooks.events) == 2  # one "completed" each, from the first ack only


def test_hands_on_dependents_and_wakes_for_keyed_tasks(broker):
    upstream = enqueue(broker)
    keyed = enqueue(broker, queue="keyed", concurrency_key="k")
    enqueue(broker, depends_on=[Dependency(upstream.id)])
    leased = broker.lease("default", 1).tasks + broker.lease("keyed", 1).tasks
    broker.hooks = hooks = LoopHooks()

    assert _ack(broker, [(t, None) for t in leased]) == []

    assert hooks.resolved == [upstream.id]
    assert hooks.woken == ["keyed"]
    assert reload(broker, keyed.id).state == State.COMPLETED


def test_acks_leave_a_connection_to_the_leases(broker):
    """With two connections, concurrent acks use one: the other stays for leases."""
    tasks = [enqueue(broker) for _ in range(6)]
    leased = broker.lease("default", 6).tasks
    broker.hooks = LoopHooks()

    async def work(leaser):
        return await asyncio.gather(*(leaser.ack([(t, None)]) for t in leased)), len(own_sessions(broker.db))

    results, opened = on_loop(LoopLeaser(broker, 2), work)
    assert results == [[]] * 6 and opened == 1
    assert {reload(broker, t.id).state for t in tasks} == {State.COMPLETED}


def test_a_failing_hook_does_not_turn_a_committed_ack_into_a_lost_one(broker):
    class Failing(LoopHooks):
        def publish(self, events):
            raise RuntimeError("event bus down")

    tasks = [enqueue(broker) for _ in range(2)]
    leased = broker.lease("default", 2).tasks
    broker.hooks = Failing()

    assert _ack(broker, [(t, None) for t in leased]) == []

    assert {reload(broker, t.id).state for t in tasks} == {State.COMPLETED}
    assert {t.state for t in leased} == {State.COMPLETED}


def test_an_ack_whose_caller_is_cancelled_still_completes_before_close_returns(broker):
    tasks = [enqueue(broker) for _ in range(2)]
    leased = broker.lease("default", 2).tasks
    broker.hooks = LoopHooks()
    leaser = LoopLeaser(broker, 2)

    async def go():
        caller = asyncio.create_task(leaser.ack([(t, None) for t in leased]))
        await asyncio.sleep(0)  # the ack has started (the caller now awaits it)
        caller.cancel()  # as a stopping node cancels its tasks
        await leaser.close(wait=10)
        return caller.cancelled(), len(own_sessions(broker.db, gone_within=2))

    cancelled, left_open = asyncio.run(go())
    assert cancelled and left_open == 0
    assert {reload(broker, t.id).state for t in tasks} == {State.COMPLETED}
