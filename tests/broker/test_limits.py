"""Per-key concurrency limits and rate limits, as the lease applies them."""

from __future__ import annotations

import pytest

from conveyor.exceptions import InvalidArgument
from conveyor.models import Queue
from conveyor.states import State
from tests.broker.factories import enqueue, reload, snapshot

# -- per-key concurrency limits --------------------------------------------------


def test_concurrency_limit_caps_active_tasks_per_key(broker):
    broker.set_concurrency_limit("default", 2)
    for _ in range(5):
        enqueue(broker, concurrency_key="acct-1")

    batch = broker.lease("default", 10)

    assert len(batch.tasks) == 2
    assert batch.throttled == "concurrency"
    assert broker.tasks.filter(state=State.ACTIVE, concurrency_key="acct-1").count() == 2


def test_limit_counts_tasks_still_active_from_earlier_leases(broker):
    broker.set_concurrency_limit("default", 2)
    for _ in range(4):
        enqueue(broker, concurrency_key="k")

    assert len(broker.lease("default", 1).tasks) == 1
    assert len(broker.lease("default", 10).tasks) == 1
    assert broker.lease("default", 10).tasks == []


def test_held_back_tasks_stay_pending_untouched(broker, clock):
    broker.set_concurrency_limit("default", 1)
    enqueue(broker, concurrency_key="k")
    held = enqueue(broker, concurrency_key="k")
    before = snapshot(broker, held.id)
    clock.advance(3)

    broker.lease("default", 10)
    broker.lease("default", 10)

    assert snapshot(broker, held.id) == before
    assert before["state"] == State.PENDING and before["retried"] == 0


def test_held_task_keeps_its_place_and_is_leased_when_its_key_frees(broker, clock):
    broker.set_concurrency_limit("default", 1)
    enqueue(broker, concurrency_key="k")
    held = enqueue(broker, concurrency_key="k")
    running = broker.lease("default", 10).tasks[0]
    clock.advance(1)
    later = enqueue(broker, priority=4)  # same priority, due after the held task

    broker.ack(running.id, running.lease_id)
    ids = [t.id for t in broker.lease("default", 10).tasks]

    assert ids == [held.id, later.id]


def test_keyless_tasks_are_never_held(broker):
    broker.set_concurrency_limit("default", 1)
    keyed = [enqueue(broker, concurrency_key="k", priority=9) for _ in range(3)]
    keyless = [enqueue(broker) for _ in range(4)]

    ids = {t.id for t in broker.lease("default", 10).tasks}

    assert ids == {keyed[0].id, *(t.id for t in keyless)}


def test_other_keys_are_leased_past_a_saturated_key(broker):
    broker.set_concurrency_limit("default", 1)
    a1 = enqueue(broker, concurrency_key="a", priority=9)
    enqueue(broker, concurrency_key="a", priority=9)
    enqueue(broker, concurrency_key="a", priority=9)
    b1 = enqueue(broker, concurrency_key="b", priority=1)

    ids = [t.id for t in broker.lease("default", 2).tasks]

    assert ids == [a1.id, b1.id]


def test_concurrency_limit_is_per_queue(broker):
    broker.set_concurrency_limit("limited", 1)
    enqueue(broker, queue="free", concurrency_key="k")
    enqueue(broker, queue="free", concurrency_key="k")
    enqueue(broker, queue="limited", concurrency_key="k")

    assert len(broker.lease("free", 10).tasks) == 2
    assert len(broker.lease("limited", 10).tasks) == 1


def test_a_finished_task_frees_its_keys_slot(broker):
    broker.set_concurrency_limit("default", 1)
    enqueue(broker, concurrency_key="k")
    enqueue(broker, concurrency_key="k")
    first = broker.lease("default", 10).tasks[0]
    broker.fail(first.id, first.lease_id, broker.now(), "boom")

    # The failed task and the held one compete for one slot; only one is leased.
    assert len(broker.lease("default", 10).tasks) == 1


def test_deleting_the_concurrency_limit_lifts_it(broker):
    broker.set_concurrency_limit("default", 1)
    for _ in range(3):
        enqueue(broker, concurrency_key="k")
    broker.lease("default", 10)

    broker.delete_concurrency_limit("default")

    assert len(broker.lease("default", 10).tasks) == 2


def test_invalid_concurrency_limit_is_rejected_and_nothing_changes(broker):
    broker.set_concurrency_limit("default", 3)
    before = list(Queue.objects.using(broker.db).values())

    for limit in (0, -1, 1.5, True, None):
        with pytest.raises(InvalidArgument) as err:
            broker.set_concurrency_limit("default", limit)
        assert err.value.field == "limit"

    assert list(Queue.objects.using(broker.db).values()) == before
    assert broker.concurrency_limit("default").limit == 3


# -- rate limits -------------------------------------------------------------------


def test_rate_limit_bucket_starts_full_at_burst(broker):
    broker.set_rate_limit("default", 1, burst=3)
    for _ in range(5):
        enqueue(broker)

    batch = broker.lease("default", 10)

    assert len(batch.tasks) == 3
    assert batch.throttled == "rate"


def test_empty_bucket_leases_nothing_and_hints_when_the_next_token_comes(broker):
    broker.set_rate_limit("default", 4, burst=1)
    enqueue(broker)
    held = enqueue(broker)
    broker.lease("default", 10)
    before = snapshot(broker, held.id)

    batch = broker.lease("default", 10)

    assert batch.tasks == []
    assert batch.throttled == "rate"
    assert batch.retry_after == pytest.approx(0.25)
    assert snapshot(broker, held.id) == before


def test_tokens_accrue_at_the_rate_over_time(broker, clock):
    broker.set_rate_limit("default", 2, burst=10)
    for _ in range(30):
        enqueue(broker)
    assert len(broker.lease("default", 100).tasks) == 10

    clock.advance(1.5)  # three tokens
    assert len(broker.lease("default", 100).tasks) == 3
    clock.advance(0.25)  # half a token: nothing yet
    assert broker.lease("default", 100).tasks == []
    clock.advance(0.25)
    assert len(broker.lease("default", 100).tasks) == 1


def test_bucket_never_holds_more_than_burst(broker, clock):
    broker.set_rate_limit("default", 5, burst=2)
    for _ in range(10):
        enqueue(broker)
    broker.lease("default", 100)

    clock.advance(3600)

    assert len(broker.lease("default", 100).tasks) == 2


def test_unused_tokens_are_kept_when_fewer_tasks_are_due(broker, clock):
    broker.set_rate_limit("default", 1, burst=3)
    enqueue(broker)
    broker.lease("default", 10)  # spends one of three tokens
    for _ in range(5):
        enqueue(broker)

    assert len(broker.lease("default", 10).tasks) == 2


def test_deleting_the_rate_limit_lifts_it(broker):
    broker.set_rate_limit("default", 1, burst=1)
    for _ in range(4):
        enqueue(broker)
    broker.lease("default", 10)

    broker.delete_rate_limit("default")

    assert len(broker.lease("default", 10).tasks) == 3


def test_invalid_rate_limit_is_rejected_and_nothing_changes(broker):
    broker.set_rate_limit("default", 3, burst=2)
    before = list(Queue.objects.using(broker.db).values())
    bad = [
        (0, 1, "rate"),
        (-2, 1, "rate"),
        ("10", 1, "rate"),
        (float("nan"), 1, "rate"),
        (5, 0, "burst"),
        (5, 2.5, "burst"),
    ]

    for rate, burst, field in bad:
        with pytest.raises(InvalidArgument) as err:
            broker.set_rate_limit("default", rate, burst=burst)
        assert err.value.field == field

    assert list(Queue.objects.using(broker.db).values()) == before


def test_rate_and_concurrency_limits_combine(broker):
    broker.set_rate_limit("default", 1, burst=3)
    broker.set_concurrency_limit("default", 1)
    enqueue(broker, concurrency_key="k")
    enqueue(broker, concurrency_key="k")
    free = enqueue(broker)

    leased = broker.lease("default", 10).tasks

    assert len(leased) == 2 and free.id in {t.id for t in leased}
    # A held task spends no token: one of the three is left.
    assert reload(broker, free.id).state == State.ACTIVE
    enqueue(broker)
    assert len(broker.lease("default", 10).tasks) == 1


def test_key_usage_counts_active_tasks_per_concurrency_key_busiest_first(broker):
    for key in ("a", "a", "b", None):
        enqueue(broker, queue="usage", concurrency_key=key)
    enqueue(broker, queue="usage", concurrency_key="c")  # pending: not in use
    broker.lease("usage", 4)

    usage = broker.key_usage()

    assert usage == {"usage": [("a", 2), ("b", 1)]}
    assert broker.key_usage(per_queue=1) == {"usage": [("a", 2)]}
