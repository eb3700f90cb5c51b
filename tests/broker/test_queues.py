"""Per-queue settings (pause, policy, limits: set / get / delete / list) and QueueStats."""

from __future__ import annotations

import pytest

from conveyor.broker.types import ConcurrencyLimit, RateLimit
from conveyor.exceptions import InvalidArgument
from conveyor.models import Queue
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one

EMPTY_COUNTS = {s.value: 0 for s in State}


def queue_rows(broker):
    return list(Queue.objects.using(broker.db).order_by("name").values())


def test_pause_and_resume_a_queue(broker, hooks):
    assert broker.queue_paused("default") is False

    broker.set_queue_paused("default", True)
    assert broker.queue_paused("default") is True

    broker.set_queue_paused("default", False)
    assert broker.queue_paused("default") is False
    assert "default" in hooks.woken()


def test_queue_policy_defaults_to_fifo_and_can_be_set(broker):
    assert broker.queue_policy("default") == "fifo"

    broker.set_queue_policy("default", "lifo")
    assert broker.queue_policy("default") == "lifo"
    broker.set_queue_policy("default", "random")
    assert broker.queue_policy("default") == "random"


def test_unknown_policy_is_rejected_and_nothing_changes(broker):
    broker.set_queue_policy("default", "lifo")
    before = queue_rows(broker)

    with pytest.raises(InvalidArgument) as err:
        broker.set_queue_policy("default", "newest")

    assert err.value.field == "policy"
    assert queue_rows(broker) == before


def test_invalid_queue_name_is_rejected_and_nothing_is_stored(broker):
    for bad in ("", "-leading-dash", "has space", "x" * 101):
        with pytest.raises(InvalidArgument) as err:
            broker.set_queue_paused(bad, True)
        assert err.value.field == "queue"

    assert queue_rows(broker) == []


def test_rate_limits_set_get_list_and_delete(broker):
    broker.set_rate_limit("b", 2.5, burst=5)
    broker.set_rate_limit("a", 1)

    assert broker.rate_limit("b") == RateLimit("b", 2.5, 5)
    assert broker.rate_limits() == [RateLimit("a", 1.0, 1), RateLimit("b", 2.5, 5)]

    broker.delete_rate_limit("b")
    broker.delete_rate_limit("never-set")  # deleting an absent limit is fine
    assert broker.rate_limit("b") is None
    assert broker.rate_limits() == [RateLimit("a", 1.0, 1)]


def test_concurrency_limits_set_get_list_and_delete(broker):
    broker.set_concurrency_limit("z", 3)
    broker.set_concurrency_limit("m", 1)
    broker.set_concurrency_limit("z", 4)  # replaces

    assert broker.concurrency_limit("z") == ConcurrencyLimit("z", 4)
    assert broker.concurrency_limits() == [ConcurrencyLimit("m", 1), ConcurrencyLimit("z", 4)]

    broker.delete_concurrency_limit("m")
    broker.delete_concurrency_limit("never-set")
    assert broker.concurrency_limit("m") is None
    assert broker.concurrency_limits() == [ConcurrencyLimit("z", 4)]


def test_deleting_one_setting_keeps_the_others(broker):
    broker.set_queue_paused("q", True)
    broker.set_rate_limit("q", 5)
    broker.set_concurrency_limit("q", 2)

    broker.delete_rate_limit("q")

    assert broker.queue_paused("q") is True
    assert broker.concurrency_limit("q") == ConcurrencyLimit("q", 2)


def test_queue_stats_counts_every_state_per_queue_sorted_by_name(broker, clock):
    enqueue(broker, queue="zeta")
    enqueue(broker, queue="alpha")
    enqueue(broker, queue="alpha", process_in=60)
    enqueue(broker, queue="alpha")
    leased = lease_one(broker, "alpha")
    broker.ack(leased.id, leased.lease_id)

    stats = broker.queue_stats()

    assert [s.name for s in stats] == ["alpha", "zeta"]
    assert stats[0].counts == {**EMPTY_COUNTS, "pending": 1, "scheduled": 1, "completed": 1}
    assert stats[1].counts == {**EMPTY_COUNTS, "pending": 1}
    assert (stats[0].total, stats[0].paused, stats[0].policy) == (3, False, "fifo")


def test_queue_stats_includes_a_paused_queue_with_no_tasks(broker):
    enqueue(broker, queue="busy")
    broker.set_queue_paused("idle", True)

    stats = {s.name: s for s in broker.queue_stats()}

    assert sorted(stats) == ["busy", "idle"]
    assert stats["idle"].paused is True
    assert stats["idle"].counts == EMPTY_COUNTS
    assert stats["busy"].paused is False


def test_queue_stats_reports_the_oldest_due_time_and_policy(broker, clock):
    first = enqueue(broker, queue="q")
    clock.advance(10)
    enqueue(broker, queue="q")
    broker.set_queue_policy("q", "lifo")

    (stat,) = broker.queue_stats()

    assert stat.oldest_due_at == first.due_at
    assert stat.policy == "lifo"
