"""Lease: which due tasks a worker gets, in what order, and what leasing writes."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.test import override_settings

from conveyor.broker import Dependency
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one, reload, snapshot


def test_fifo_orders_by_priority_desc_then_due_time_asc_then_id_asc(broker, clock):
    late_low = enqueue(broker, priority=2, process_in=0)
    clock.advance(1)
    early_high = enqueue(broker, priority=8)
    clock.advance(1)
    first_default = enqueue(broker)
    second_default = enqueue(broker)  # same due time as first_default, larger id
    older_default = enqueue(broker, process_at=clock.now() - timedelta(seconds=30))

    ids = [t.id for t in broker.lease("default", 10).tasks]

    assert ids == [early_high.id, older_default.id, first_default.id, second_default.id, late_low.id]


def test_lifo_orders_by_priority_desc_then_due_time_desc_then_id_desc(broker, clock):
    broker.set_queue_policy("default", "lifo")
    low = enqueue(broker, priority=1)
    clock.advance(1)
    first = enqueue(broker)
    second = enqueue(broker)
    clock.advance(1)
    newest = enqueue(broker)
    high = enqueue(broker, priority=9, process_at=clock.now() - timedelta(seconds=60))

    ids = [t.id for t in broker.lease("default", 10).tasks]

    assert ids == [high.id, newest.id, second.id, first.id, low.id]


def test_a_policy_change_between_leases_takes_effect_on_the_next_lease(broker, clock):
    # The PostgreSQL lease guesses the policy it last saw; a change must
    # still order the very next lease by the new policy, in both directions.
    older = enqueue(broker)
    clock.advance(1)
    newer = enqueue(broker)
    assert [t.id for t in broker.lease("default", 1).tasks] == [older.id]

    broker.set_queue_policy("default", "lifo")
    clock.advance(1)
    newest = enqueue(broker)
    assert [t.id for t in broker.lease("default", 1).tasks] == [newest.id]

    broker.set_queue_policy("default", "fifo")
    assert [t.id for t in broker.lease("default", 1).tasks] == [newer.id]


def test_random_policy_claims_each_due_task_once_and_nothing_else(broker, clock):
    broker.set_queue_policy("default", "random")
    due = {enqueue(broker).id for _ in range(12)}
    enqueue(broker, process_in=60)  # scheduled, not due
    enqueue(broker, queue="other")

    claimed = [t.id for t in broker.lease("default", 5).tasks] + [t.id for t in broker.lease("default", 50).tasks]

    assert len(claimed) == len(set(claimed)) == 12
    assert set(claimed) == due


def test_lease_claims_at_most_n_tasks_and_nothing_for_n_below_one(broker):
    tasks = [enqueue(broker) for _ in range(5)]
    before = {t.id: snapshot(broker, t.id) for t in tasks}

    assert broker.lease("default", 0).tasks == []
    assert broker.lease("default", -3).tasks == []
    assert {t.id: snapshot(broker, t.id) for t in tasks} == before
    assert len(broker.lease("default", 3).tasks) == 3
    assert len(broker.lease("default", 3).tasks) == 2


def test_leased_task_is_active_with_started_at_now_and_expiry_now_plus_ttl(broker, clock):
    task = enqueue(broker)
    clock.advance(5)

    leased = broker.lease("default", 1, holder="worker-1").tasks[0]

    stored = reload(broker, task.id)
    assert stored.state == State.ACTIVE
    assert stored.started_at == clock.now()
    assert stored.lease_expires_at == clock.now() + timedelta(seconds=60)
    assert stored.lease_holder == "worker-1"
    assert stored.lease_id == leased.lease_id and stored.lease_id
    assert leased.state == State.ACTIVE and leased.lease_expires_at == stored.lease_expires_at


@override_settings(CONVEYOR={"LEASE_TTL": 7})
def test_lease_expiry_follows_the_lease_ttl_setting(broker, clock):
    enqueue(broker)

    leased = lease_one(broker)

    assert reload(broker, leased.id).lease_expires_at == clock.now() + timedelta(seconds=7)


def test_each_leased_task_gets_its_own_fresh_lease_id(broker):
    for _ in range(4):
        enqueue(broker)
    tasks = broker.lease("default", 4).tasks
    broker.release(tasks[0].id, tasks[0].lease_id)

    again = lease_one(broker)

    lease_ids = [reload(broker, t.id).lease_id for t in tasks[1:]]
    assert lease_ids == [t.lease_id for t in tasks[1:]]
    assert len({*lease_ids, tasks[0].lease_id, again.lease_id}) == 5
    assert again.id == tasks[0].id


def test_lease_resets_progress_of_a_previous_attempt(broker):
    enqueue(broker)
    first = lease_one(broker)
    broker.set_progress(first.id, first.lease_id, 70, "halfway")
    broker.release(first.id, first.lease_id)

    again = lease_one(broker)

    stored = reload(broker, again.id)
    assert (stored.progress, stored.progress_message) == (0, "")


def test_next_due_at_names_the_earliest_future_retry(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    retry_at = clock.now() + timedelta(seconds=40)
    broker.fail(leased.id, leased.lease_id, retry_at, "boom")

    batch = broker.lease("default", 5)

    assert batch.tasks == []
    assert batch.next_due_at == retry_at


def test_lease_claims_retry_tasks_once_they_are_due(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    broker.fail(leased.id, leased.lease_id, clock.now() + timedelta(seconds=20), "boom")

    clock.advance(19)
    assert broker.lease("default", 1).tasks == []
    clock.advance(1)
    again = lease_one(broker)

    assert again.id == leased.id
    assert reload(broker, again.id).retried == 1


def test_lease_never_claims_a_waiting_task_past_its_expiry(broker, clock):
    expiring = enqueue(broker, expires_in=10)
    keeper = enqueue(broker)
    clock.advance(10)

    ids = [t.id for t in broker.lease("default", 5).tasks]

    assert ids == [keeper.id]
    assert reload(broker, expiring.id).state == State.PENDING


def test_lease_takes_only_pending_and_retry_tasks_of_the_named_queue(broker, clock):
    wanted = enqueue(broker)
    enqueue(broker, queue="elsewhere")
    scheduled = enqueue(broker, process_in=3600)
    grouped = enqueue(broker, group="g")
    blocked = enqueue(broker, depends_on=[Dependency(scheduled.id)])

    batch = broker.lease("default", 10)

    assert [t.id for t in batch.tasks] == [wanted.id]
    states = Counter(reload(broker, t.id).state for t in (scheduled, grouped, blocked))
    assert states == {State.SCHEDULED: 1, State.AGGREGATING: 1, State.BLOCKED: 1}


def test_active_tasks_are_not_leased_twice(broker):
    enqueue(broker)
    enqueue(broker)
    first = broker.lease("default", 10).tasks

    assert len(first) == 2
    assert broker.lease("default", 10).tasks == []


def test_paused_queue_leases_nothing_and_keeps_its_tasks(broker):
    task = enqueue(broker)
    broker.set_queue_paused("default", True)
    before = snapshot(broker, task.id)

    batch = broker.lease("default", 10)

    assert batch.tasks == [] and batch.throttled == "paused"
    assert snapshot(broker, task.id) == before


def test_pause_is_per_queue_and_a_resumed_queue_leases_again(broker):
    task = enqueue(broker)
    other = enqueue(broker, queue="other")
    broker.set_queue_paused("default", True)

    assert [t.id for t in broker.lease("other", 10).tasks] == [other.id]
    broker.set_queue_paused("default", False)
    assert [t.id for t in broker.lease("default", 10).tasks] == [task.id]


def test_lease_publishes_a_leased_event_per_task(broker, hooks):
    a, b = enqueue(broker), enqueue(broker)

    broker.lease("default", 10)

    leased = [(e.task_id, e.state) for e in hooks.events if e.kind == "leased"]
    assert sorted(leased) == sorted([(a.id, State.ACTIVE), (b.id, State.ACTIVE)])
