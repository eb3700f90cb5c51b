"""Crash attribution: settle_crash and defer_suspects (conveyor/broker/crashes.py)."""

from __future__ import annotations

from datetime import timedelta

from conveyor.broker import RetrySpec
from conveyor.broker.crashes import DEFER_SECONDS, WORKER_LOST
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one, reload, snapshot

FIXED = RetrySpec(kind="fixed", base=7)


def refs(tasks):
    return [(t.id, t.lease_id) for t in tasks]


def crash_into_suspects(broker, n, **fields):
    """Lease *n* tasks to one worker and crash it: *n* suspects, none charged."""
    for _ in range(n):
        enqueue(broker, **fields)
    tasks = broker.lease("default", n).tasks
    broker.settle_crash(refs(tasks))
    return tasks


def test_a_crash_with_one_task_in_flight_charges_it_and_retries_after_its_backoff(broker, clock):
    enqueue(broker, retry_policy=FIXED)
    leased = lease_one(broker)

    report = broker.settle_crash(refs([leased]))

    stored = reload(broker, leased.id)
    assert report.charged == [leased.id]
    assert (stored.state, stored.retried, stored.last_error) == (State.RETRY, 1, WORKER_LOST)
    assert stored.due_at == clock.now() + timedelta(seconds=7)
    assert stored.suspect is True


def test_a_crash_with_several_tasks_and_no_suspect_charges_none_and_makes_each_a_suspect(broker, clock, hooks):
    for _ in range(3):
        enqueue(broker, retry_policy=FIXED)
    tasks = broker.lease("default", 3).tasks

    report = broker.settle_crash(refs(tasks))

    assert sorted(report.suspects) == sorted(t.id for t in tasks) and report.charged == []
    for task in tasks:
        stored = reload(broker, task.id)
        assert (stored.state, stored.retried, stored.suspect) == (State.RETRY, 0, True)
        assert stored.due_at == clock.now() + timedelta(seconds=7)  # backoff, not due at once
        assert stored.last_error == "worker connection lost with 3 tasks in flight (attempt not counted)"
    assert len([e for e in hooks.events if e.kind == "retried"]) == 3


def test_a_crash_with_one_suspect_among_others_charges_only_the_suspect(broker, clock):
    # A worker serving two queues crashed with one task of each: both suspects.
    enqueue(broker, queue="s", retry_policy=FIXED)
    enqueue(broker, queue="t", retry_policy=FIXED)
    broker.settle_crash(refs([lease_one(broker, "s"), lease_one(broker, "t")]))
    clock.advance(7)
    suspect = lease_one(broker, "s")
    for _ in range(2):
        enqueue(broker)
    innocents = broker.lease("default", 2).tasks
    assert suspect.suspect is True and {t.suspect for t in innocents} == {False}  # the lease says who is one

    report = broker.settle_crash(refs([suspect, *innocents]))

    assert report.charged == [suspect.id]
    stored = reload(broker, suspect.id)
    assert (stored.state, stored.retried, stored.last_error) == (State.RETRY, 1, WORKER_LOST)
    for task in innocents:
        innocent = reload(broker, task.id)
        assert (innocent.state, innocent.retried, innocent.suspect) == (State.PENDING, 0, False)
        assert innocent.due_at == clock.now()


def test_a_suspect_out_of_retries_is_archived_and_the_tasks_beside_it_are_released(broker, clock):
    suspect = crash_into_suspects(broker, 2, max_retry=0)[0]
    clock.advance(3600)
    lease = {t.id: t for t in broker.lease("default", 2).tasks}
    enqueue(broker)
    innocent = lease_one(broker)
    other = next(t for tid, t in lease.items() if tid != suspect.id)
    broker.release(other.id, other.lease_id)

    broker.settle_crash(refs([lease[suspect.id], innocent]))

    stored = reload(broker, suspect.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, f"retries exhausted: {WORKER_LOST}")
    assert stored.suspect is True
    assert (reload(broker, innocent.id).state, reload(broker, innocent.id).retried) == (State.PENDING, 0)


def test_a_crash_charges_every_suspect_it_held(broker, clock):
    # Dispatch never puts two suspects on one worker; should it happen, each
    # is charged, so no task escapes its max_retry.
    first, second = crash_into_suspects(broker, 2)
    clock.advance(3600)
    again = broker.lease("default", 2).tasks

    report = broker.settle_crash(refs(again))

    assert sorted(report.charged) == sorted([first.id, second.id])
    assert {reload(broker, t.id).retried for t in again} == {1}


def test_a_crashed_task_canceled_while_running_is_archived(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    broker.cancel_task(a.id)

    broker.settle_crash(refs([a, b]))

    stored = reload(broker, a.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, f"canceled while running: {WORKER_LOST}")
    assert (reload(broker, b.id).state, reload(broker, b.id).retried) == (State.RETRY, 0)


def test_a_crash_counts_the_tasks_in_flight_even_when_some_lease_was_lost(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    broker.release(b.id, b.lease_id)
    before = snapshot(broker, b.id)

    report = broker.settle_crash(refs([a, b]))

    assert (report.suspects, report.charged, report.lost) == ([a.id], [], [b.id])
    assert reload(broker, a.id).retried == 0
    assert snapshot(broker, b.id) == before


def test_deferring_a_suspect_gives_it_back_for_a_moment_with_nothing_spent(broker, clock, hooks):
    suspect = crash_into_suspects(broker, 2)[0]
    clock.advance(3600)
    leased = {t.id: t for t in broker.lease("default", 2).tasks}[suspect.id]
    error = reload(broker, suspect.id).last_error

    lost = broker.defer_suspects([(leased.id, leased.lease_id), ("no-such-task", "x")])

    stored = reload(broker, suspect.id)
    assert lost == ["no-such-task"]
    assert (stored.state, stored.retried, stored.last_error, stored.suspect) == (State.RETRY, 0, error, True)
    low, high = DEFER_SECONDS
    assert clock.now() + timedelta(seconds=low) <= stored.due_at <= clock.now() + timedelta(seconds=high)
    assert hooks.events[-1].kind == "released"


def test_a_task_that_never_crashed_is_no_suspect(broker):
    enqueue(broker)

    leased = lease_one(broker)

    assert leased.suspect is False
