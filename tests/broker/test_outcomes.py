"""Lease-scoped outcomes: ack, fail, settle_failure, release, archive, extend, progress."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor.broker import RetrySpec
from conveyor.exceptions import InvalidArgument, LeaseLost
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one, reload, snapshot

# -- ack -------------------------------------------------------------------------


def test_ack_completes_the_task_at_now_and_stores_the_result(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(4)

    broker.ack(leased.id, leased.lease_id, b'{"ok": true}')

    stored = reload(broker, leased.id)
    assert stored.state == State.COMPLETED
    assert stored.finished_at == clock.now()
    assert bytes(stored.result) == b'{"ok": true}'


def test_ack_with_a_wrong_lease_or_unknown_task_raises_lease_lost_and_changes_nothing(broker):
    enqueue(broker)
    leased = lease_one(broker)
    before = snapshot(broker, leased.id)

    with pytest.raises(LeaseLost):
        broker.ack(leased.id, "not-the-lease", b"x")
    with pytest.raises(LeaseLost):
        broker.ack("no-such-task", leased.lease_id)

    assert snapshot(broker, leased.id) == before


def test_ack_with_a_stale_lease_after_release_and_relase_raises_lease_lost(broker):
    enqueue(broker)
    first = lease_one(broker)
    broker.release(first.id, first.lease_id)
    second = lease_one(broker)
    before = snapshot(broker, second.id)

    with pytest.raises(LeaseLost):
        broker.ack(first.id, first.lease_id)

    assert snapshot(broker, second.id) == before


def test_second_ack_of_the_same_lease_raises_lease_lost(broker):
    enqueue(broker)
    leased = lease_one(broker)
    broker.ack(leased.id, leased.lease_id, b"first")

    with pytest.raises(LeaseLost):
        broker.ack(leased.id, leased.lease_id, b"second")

    assert bytes(reload(broker, leased.id).result) == b"first"


def test_ack_many_completes_each_and_reports_lost_leases(broker, clock):
    for _ in range(3):
        enqueue(broker)
    a, b, c = broker.lease("default", 3).tasks
    broker.release(c.id, c.lease_id)
    clock.advance(2)

    lost = broker.ack_many([(a, b"ra"), (b, None), (c, b"rc")])

    assert lost == [c.id]
    assert (reload(broker, a.id).state, bytes(reload(broker, a.id).result)) == (State.COMPLETED, b"ra")
    assert (reload(broker, b.id).state, reload(broker, b.id).result) == (State.COMPLETED, None)
    assert reload(broker, b.id).finished_at == clock.now()
    assert reload(broker, c.id).state == State.PENDING


def test_ack_many_repeated_at_the_same_instant_reports_every_lease_lost(broker, hooks):
    for _ in range(2):
        enqueue(broker)
    tasks = broker.lease("default", 2).tasks
    assert broker.ack_many([(t, None) for t in tasks]) == []

    lost = broker.ack_many([(t, b"again") for t in tasks])

    assert sorted(lost) == sorted(t.id for t in tasks)
    assert all(reload(broker, t.id).result is None for t in tasks)
    assert len([e for e in hooks.events if e.kind == "completed"]) == 2


def test_ack_many_matches_each_task_to_its_own_lease(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    a_forged, b_forged = broker.get_task(a.id), broker.get_task(b.id)
    a_forged.lease_id, b_forged.lease_id = b.lease_id, a.lease_id  # each with the other's lease

    lost = broker.ack_many([(a_forged, None), (b_forged, None)])

    assert sorted(lost) == sorted([a.id, b.id])
    assert {reload(broker, a.id).state, reload(broker, b.id).state} == {State.ACTIVE}


def test_every_outcome_with_a_wrong_lease_raises_lease_lost_and_changes_nothing(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    before = snapshot(broker, leased.id)
    clock.advance(10)
    attempts = {
        "fail": lambda lease: broker.fail(leased.id, lease, clock.now(), "boom"),
        "settle_failure": lambda lease: broker.settle_failure(leased.id, lease, "boom"),
        "settle_failure skip": lambda lease: broker.settle_failure(leased.id, lease, "boom", skip_retry=True),
        "release": lambda lease: broker.release(leased.id, lease),
        "archive_leased": lambda lease: broker.archive_leased(leased.id, lease, "poison"),
        "extend": lambda lease: broker.extend(leased.id, lease),
        "set_progress": lambda lease: broker.set_progress(leased.id, lease, 50, "half"),
    }

    for name, attempt in attempts.items():
        with pytest.raises(LeaseLost):
            attempt("stale-lease")
        assert snapshot(broker, leased.id) == before, name


# -- fail --------------------------------------------------------------------------


def test_fail_moves_the_task_to_retry_due_at_retry_at(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    retry_at = clock.now() + timedelta(seconds=30)

    broker.fail(leased.id, leased.lease_id, retry_at, "boom")

    stored = reload(broker, leased.id)
    assert (stored.state, stored.retried, stored.last_error, stored.due_at) == (State.RETRY, 1, "boom", retry_at)


def test_fail_of_a_task_canceled_while_running_archives_it(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)

    broker.fail(leased.id, leased.lease_id, clock.now() + timedelta(seconds=5), "boom")

    stored = reload(broker, leased.id)
    assert stored.state == State.ARCHIVED
    assert stored.last_error.startswith("canceled while running")


def test_fail_and_settle_failure_reject_bad_times_and_change_nothing(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    before = snapshot(broker, leased.id)

    with pytest.raises(InvalidArgument) as err:
        broker.fail(leased.id, leased.lease_id, clock.now().replace(tzinfo=None), "boom")
    assert err.value.field == "retry_at"
    for delay in (-1, float("nan"), float("inf")):
        with pytest.raises(InvalidArgument) as err:
            broker.settle_failure(leased.id, leased.lease_id, "boom", delay=delay)
        assert err.value.field == "delay"

    assert snapshot(broker, leased.id) == before


# -- settle_failure ------------------------------------------------------------------


def test_settle_failure_retries_after_exponential_full_jitter_backoff(broker, clock):
    enqueue(broker)
    for retried in range(4):
        leased = lease_one(broker)
        now = clock.now()
        broker.settle_failure(leased.id, leased.lease_id, "boom")
        stored = reload(broker, leased.id)
        assert stored.state == State.RETRY and stored.retried == retried + 1
        assert now <= stored.due_at < now + timedelta(seconds=2 * 2**retried)
        clock.set(stored.due_at)


def test_settle_failure_follows_the_tasks_own_retry_policy(broker, clock):
    fixed = enqueue(broker, queue="fixed", retry_policy=RetrySpec(kind="fixed", base=7))
    linear = enqueue(broker, queue="linear", retry_policy=RetrySpec(kind="linear", base=100, cap=3))

    for task in (fixed, linear):
        leased = lease_one(broker, task.queue)
        broker.settle_failure(leased.id, leased.lease_id, "boom")

    assert reload(broker, fixed.id).due_at == clock.now() + timedelta(seconds=7)
    assert clock.now() <= reload(broker, linear.id).due_at < clock.now() + timedelta(seconds=3)


def test_settle_failure_with_an_explicit_delay_retries_after_it(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)

    broker.settle_failure(leased.id, leased.lease_id, "slow down", delay=42)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.due_at) == (State.RETRY, clock.now() + timedelta(seconds=42))


def test_settle_failure_archives_when_retries_are_exhausted(broker, clock):
    enqueue(broker, max_retry=1)
    leased = lease_one(broker)
    broker.settle_failure(leased.id, leased.lease_id, "first", delay=0)
    leased = lease_one(broker)

    broker.settle_failure(leased.id, leased.lease_id, "second")

    stored = reload(broker, leased.id)
    assert stored.state == State.ARCHIVED
    assert stored.last_error == "retries exhausted: second"
    assert stored.finished_at == clock.now()


def test_settle_failure_with_max_retry_zero_archives_the_first_failure(broker):
    enqueue(broker, max_retry=0)
    leased = lease_one(broker)

    broker.settle_failure(leased.id, leased.lease_id, "boom")

    stored = reload(broker, leased.id)
    assert (stored.state, stored.last_error, stored.retried) == (State.ARCHIVED, "retries exhausted: boom", 0)


def test_settle_failure_with_skip_retry_archives_with_retries_left(broker):
    enqueue(broker)
    leased = lease_one(broker)

    broker.settle_failure(leased.id, leased.lease_id, "bad input", skip_retry=True)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.last_error, stored.retried) == (State.ARCHIVED, "bad input", 0)


# -- release -------------------------------------------------------------------------


def test_release_returns_the_task_to_pending_due_now_without_spending_a_retry(broker, clock):
    enqueue(broker, process_at=clock.now() - timedelta(seconds=100))
    leased = lease_one(broker)
    clock.advance(9)

    broker.release(leased.id, leased.lease_id)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.due_at, stored.retried) == (State.PENDING, clock.now(), 0)


def test_release_many_releases_live_leases_and_reports_lost_ones(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    broker.ack(b.id, b.lease_id)

    lost = broker.release_many([(a.id, a.lease_id), (b.id, b.lease_id)])

    assert lost == [b.id]
    assert reload(broker, a.id).state == State.PENDING
    assert reload(broker, b.id).state == State.COMPLETED


# -- archive, extend, progress ---------------------------------------------------------


def test_archive_leased_dead_letters_the_task(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)

    broker.archive_leased(leased.id, leased.lease_id, "poison")

    stored = reload(broker, leased.id)
    assert (stored.state, stored.last_error, stored.finished_at) == (State.ARCHIVED, "poison", clock.now())


def test_extend_moves_the_lease_expiry_to_now_plus_ttl(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(45)

    expires = broker.extend(leased.id, leased.lease_id)

    assert expires == clock.now() + timedelta(seconds=60)
    assert reload(broker, leased.id).lease_expires_at == expires


def test_extend_many_reports_lost_leases(broker, clock):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    broker.ack(b.id, b.lease_id)
    clock.advance(30)

    expires, lost = broker.extend_many([(a.id, a.lease_id), (b.id, b.lease_id)])

    assert lost == [b.id]
    assert reload(broker, a.id).lease_expires_at == expires == clock.now() + timedelta(seconds=60)


def test_extend_many_matches_each_task_to_its_own_lease(broker):
    for _ in range(2):
        enqueue(broker)
    a, b = broker.lease("default", 2).tasks
    before = [snapshot(broker, a.id), snapshot(broker, b.id)]

    _, lost = broker.extend_many([(a.id, b.lease_id), (b.id, a.lease_id)])

    assert sorted(lost) == sorted([a.id, b.id])
    assert [snapshot(broker, a.id), snapshot(broker, b.id)] == before


def test_set_progress_clamps_to_0_100_and_keeps_the_message(broker):
    enqueue(broker)
    leased = lease_one(broker)

    for given, stored in [(-5, 0), (42, 42), (250, 100), (33.7, 33)]:
        broker.set_progress(leased.id, leased.lease_id, given, f"at {given}")

        row = reload(broker, leased.id)
        assert (row.progress, row.progress_message) == (stored, f"at {given}")


def test_set_progress_rejects_a_non_number_and_changes_nothing(broker):
    enqueue(broker)
    leased = lease_one(broker)
    before = snapshot(broker, leased.id)

    with pytest.raises(InvalidArgument) as err:
        broker.set_progress(leased.id, leased.lease_id, float("nan"))

    assert err.value.field == "percent"
    assert snapshot(broker, leased.id) == before


def test_outcomes_wake_the_queue_when_work_becomes_due(broker, clock, hooks):
    enqueue(broker, queue="q", concurrency_key="k")
    enqueue(broker, queue="q")
    enqueue(broker, queue="q")
    keyed, *plain = sorted(broker.lease("q", 3).tasks, key=lambda t: t.concurrency_key is None)
    retry_at = clock.now() + timedelta(seconds=30)
    hooks.wakes.clear()

    broker.fail(plain[0].id, plain[0].lease_id, retry_at, "boom")
    assert hooks.wakes == [("q", retry_at)]
    hooks.wakes.clear()
    broker.release(plain[1].id, plain[1].lease_id)
    assert hooks.wakes == [("q", None)]
    hooks.wakes.clear()
    broker.ack(keyed.id, keyed.lease_id)  # frees a concurrency slot
    assert hooks.wakes == [("q", None)]
