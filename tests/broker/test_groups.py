"""Aggregation groups: configs, stats, when a group fires, and LeaseGroup."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor.broker.types import GroupSettings
from conveyor.exceptions import InvalidArgument, LeaseLost
from conveyor.models import GroupConfig
from conveyor.states import State
from tests.broker.factories import enqueue, reload


def fill(broker, clock, n, group="g", queue="default", step=0.0):
    tasks = []
    for _ in range(n):
        tasks.append(enqueue(broker, queue=queue, group=group))
        if step:
            clock.advance(step)
    return tasks


def due_keys(broker):
    return [(s.queue, s.group) for s in broker.due_groups()]


# -- configs ----------------------------------------------------------------------------


def test_group_config_defaults_to_the_server_settings(broker):
    assert broker.group_config("default", "g") == GroupSettings("default", "g", 100, 60.0, 10.0)


def test_group_config_falls_back_from_group_to_queue_default(broker):
    broker.set_group_config("q", "", max_size=5, max_delay=30, grace=3)
    broker.set_group_config("q", "special", max_size=50, max_delay=120, grace=20)

    assert broker.group_config("q", "special") == GroupSettings("q", "special", 50, 120.0, 20.0)
    assert broker.group_config("q", "other") == GroupSettings("q", "other", 5, 30.0, 3.0)
    assert broker.group_config("elsewhere", "special") == GroupSettings("elsewhere", "special", 100, 60.0, 10.0)


def test_group_configs_list_by_queue_then_group_and_delete(broker):
    broker.set_group_config("b", "x", max_size=2)
    broker.set_group_config("a", "y", max_size=3)
    broker.set_group_config("a", "", max_size=4)
    broker.set_group_config("a", "y", max_size=9)  # replaces

    assert [(c.queue, c.group, c.max_size) for c in broker.group_configs()] == [
        ("a", "", 4),
        ("a", "y", 9),
        ("b", "x", 2),
    ]

    broker.delete_group_config("a", "y")
    broker.delete_group_config("a", "never-set")
    assert [(c.queue, c.group) for c in broker.group_configs()] == [("a", ""), ("b", "x")]


def test_invalid_group_config_is_rejected_and_nothing_changes(broker):
    broker.set_group_config("q", "g", max_size=5)
    before = list(GroupConfig.objects.using(broker.db).values())
    bad = [
        ({"max_size": 0}, "max_size"),
        ({"max_size": 2.5}, "max_size"),
        ({"max_delay": -1}, "max_delay"),
        ({"grace": 0}, "grace"),
        ({"grace": "10s"}, "grace"),
    ]

    for fields, field in bad:
        with pytest.raises(InvalidArgument) as err:
            broker.set_group_config("q", "g", **fields)
        assert err.value.field == field
    with pytest.raises(InvalidArgument) as err:
        broker.set_group_config("bad queue", "g", max_size=1)
    assert err.value.field == "queue"

    assert list(GroupConfig.objects.using(broker.db).values()) == before


# -- stats and firing ---------------------------------------------------------------------


def test_group_stats_count_members_with_oldest_and_newest_enqueue_time(broker, clock):
    first = enqueue(broker, group="g")
    clock.advance(5)
    last = enqueue(broker, group="g")
    enqueue(broker, group="h")
    enqueue(broker, queue="other", group="g")

    stats = {(s.queue, s.group): s for s in broker.group_stats()}

    assert sorted(stats) == [("default", "g"), ("default", "h"), ("other", "g")]
    g = stats[("default", "g")]
    assert (g.count, g.oldest, g.newest) == (2, first.enqueued_at, last.enqueued_at)
    assert [s.group for s in broker.group_stats("default")] == ["g", "h"]


def test_a_group_fires_when_it_reaches_max_size(broker, clock):
    broker.set_group_config("default", "g", max_size=3, max_delay=600, grace=600)
    fill(broker, clock, 2)
    assert due_keys(broker) == []

    fill(broker, clock, 1)

    assert due_keys(broker) == [("default", "g")]


def test_a_group_fires_when_its_oldest_member_reaches_max_delay(broker, clock):
    broker.set_group_config("default", "g", max_size=100, max_delay=30, grace=600)
    first = clock.now()
    fill(broker, clock, 5, step=5)  # a new member every 5 s keeps grace from firing
    clock.advance(4.999)
    assert clock.now() - first == timedelta(seconds=29.999)
    assert due_keys(broker) == []

    clock.advance(0.001)

    assert due_keys(broker) == [("default", "g")]


def test_a_group_fires_when_no_member_arrived_for_the_grace_period(broker, clock):
    broker.set_group_config("default", "g", max_size=100, max_delay=600, grace=10)
    fill(broker, clock, 2)
    clock.advance(9)
    assert due_keys(broker) == []
    enqueue(broker, group="g")  # a late arrival restarts the grace period
    clock.advance(9)
    assert due_keys(broker) == []

    clock.advance(1)

    assert due_keys(broker) == [("default", "g")]


def test_each_group_fires_by_its_own_config(broker, clock):
    broker.set_group_config("default", "", max_size=2, max_delay=600, grace=600)
    broker.set_group_config("default", "big", max_size=5, max_delay=600, grace=600)
    fill(broker, clock, 2, group="small")
    fill(broker, clock, 2, group="big")

    assert due_keys(broker) == [("default", "small")]


# -- lease group ---------------------------------------------------------------------------


def test_lease_group_claims_members_in_enqueue_order_under_one_shared_lease(broker, clock):
    broker.set_group_config("default", "g", max_size=3)
    members = fill(broker, clock, 5, step=1)

    batch = broker.lease_group("default", "g", holder="w1")

    assert [t.id for t in batch.tasks] == [t.id for t in members[:3]]
    stored = [reload(broker, t.id) for t in members]
    assert {s.lease_id for s in stored[:3]} == {batch.tasks[0].lease_id}
    assert all(
        s.state == State.ACTIVE and s.lease_expires_at == clock.now() + timedelta(seconds=60) for s in stored[:3]
    )
    assert [s.state for s in stored[3:]] == [State.AGGREGATING, State.AGGREGATING]


def test_lease_group_orders_members_enqueued_at_the_same_time_by_id(broker, clock):
    members = fill(broker, clock, 4)

    batch = broker.lease_group("default", "g")

    assert [t.id for t in batch.tasks] == sorted(t.id for t in members)


def test_group_members_are_acked_individually(broker, clock):
    fill(broker, clock, 3)
    a, b, c = broker.lease_group("default", "g").tasks

    broker.ack(a.id, a.lease_id)
    broker.settle_failure(b.id, b.lease_id, "bad item", skip_retry=True)

    assert [reload(broker, t.id).state for t in (a, b, c)] == [State.COMPLETED, State.ARCHIVED, State.ACTIVE]
    with pytest.raises(LeaseLost):
        broker.ack(a.id, a.lease_id)


def test_lease_group_takes_only_that_group_of_that_queue(broker, clock):
    mine = fill(broker, clock, 2, group="g")
    fill(broker, clock, 2, group="h")
    fill(broker, clock, 2, group="g", queue="other")

    batch = broker.lease_group("default", "g")

    assert sorted(t.id for t in batch.tasks) == sorted(t.id for t in mine)


def test_lease_group_of_a_paused_queue_claims_nothing(broker, clock):
    members = fill(broker, clock, 2)
    broker.set_queue_paused("default", True)

    batch = broker.lease_group("default", "g")

    assert (batch.tasks, batch.throttled) == ([], "paused")
    assert {reload(broker, t.id).state for t in members} == {State.AGGREGATING}
