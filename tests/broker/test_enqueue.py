"""Enqueue of a single task: ids, defaults, initial state, wakes and events."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import MappingProxyType

import pytest
from django.db import connections

from conveyor.broker import RetrySpec, TaskSpec
from conveyor.ids import ALPHABET

MIB = 1024 * 1024


def spec(**kw) -> TaskSpec:
    kw.setdefault("type", "t")
    return TaskSpec(**kw)


def stored(broker, task_id: str):
    return broker.get_task(task_id)


def event_kinds(hooks, task_id: str) -> list[str]:
    return [e.kind for e in hooks.events if e.task_id == task_id]


# -- ids ---------------------------------------------------------------------


def test_enqueue_without_id_assigns_a_ulid(broker):
    task = broker.enqueue(spec())
    assert len(task.id) == 26
    assert set(task.id) <= set(ALPHABET)
    assert stored(broker, task.id).type == "t"


def test_assigned_ids_sort_by_enqueue_time(broker, clock):
    first = broker.enqueue(spec())
    clock.advance(1)
    second = broker.enqueue(spec())
    assert first.id < second.id


def test_given_id_is_kept(broker):
    task = broker.enqueue(spec(id="order-42"))
    assert task.id == "order-42"
    assert stored(broker, "order-42").state == "pending"


def test_repeated_id_returns_stored_task_unchanged(broker, clock):
    first = broker.enqueue(spec(id="same", payload=b"one", priority=2, queue="a"))
    clock.advance(30)
    again = broker.enqueue(spec(id="same", type="other", payload=b"two", priority=8, queue="b", process_in=60))
    assert broker.tasks.count() == 1
    assert (again.id, again.type, again.queue, again.priority, again.state) == ("same", "t", "a", 2, "pending")
    assert bytes(again.payload) == b"one"
    assert again.enqueued_at == first.enqueued_at
    row = stored(broker, "same")
    assert (row.type, row.queue, row.priority, bytes(row.payload)) == ("t", "a", 2, b"one")


def test_repeated_id_returns_the_current_state_of_the_stored_task(broker):
    broker.enqueue(spec(id="same"))
    leased = broker.lease("default", 1).tasks[0]
    broker.ack(leased.id, leased.lease_id)
    assert broker.enqueue(spec(id="same")).state == "completed"
    assert broker.tasks.count() == 1


def test_repeated_id_sends_no_wake_and_no_event(broker, hooks):
    broker.enqueue(spec(id="same"))
    wakes, events = len(hooks.wakes), len(hooks.events)
    broker.enqueue(spec(id="same"))
    assert len(hooks.wakes) == wakes
    assert len(hooks.events) == events


def test_concurrent_enqueues_of_one_id_store_it_once_and_return_it_to_all(broker, db_alias):
    if db_alias != "postgres":
        pytest.skip("SQLite serializes writers; the race needs PostgreSQL")
    n = 10
    barrier = threading.Barrier(n)
    outcomes: list = []

    def enqueue(i: int) -> None:
        try:
            barrier.wait()
            outcomes.append(broker.enqueue(spec(id="same", payload=str(i).encode())))
        except BaseException as exc:  # checked below
            outcomes.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [type(o).__name__ for o in outcomes] == ["Task"] * n
    assert broker.tasks.count() == 1
    assert {bytes(o.payload) for o in outcomes} == {bytes(broker.get_task("same").payload)}


# -- defaults and stored fields ------------------------------------------------


def test_queue_defaults_to_default(broker):
    assert stored(broker, broker.enqueue(spec()).id).queue == "default"


@pytest.mark.parametrize("queue", ["Q1.x_y-z", "9" * 100])
def test_queue_names_matching_the_pattern_are_accepted(broker, queue):
    assert stored(broker, broker.enqueue(spec(queue=queue)).id).queue == queue


@pytest.mark.parametrize("priority", [None, 0])
def test_absent_or_zero_priority_means_4(broker, priority):
    assert stored(broker, broker.enqueue(spec(priority=priority)).id).priority == 4


@pytest.mark.parametrize("priority", [1, 9])
def test_priority_bounds_1_and_9_are_accepted(broker, priority):
    assert stored(broker, broker.enqueue(spec(priority=priority)).id).priority == priority


def test_absent_max_retry_means_25(broker):
    assert stored(broker, broker.enqueue(spec()).id).max_retry == 25


def test_max_retry_zero_is_accepted(broker):
    assert stored(broker, broker.enqueue(spec(max_retry=0)).id).max_retry == 0


def test_payload_is_stored_as_bytes_with_json_content_type_by_default(broker):
    row = stored(broker, broker.enqueue(spec(payload=b'{"a": 1}')).id)
    assert bytes(row.payload) == b'{"a": 1}'
    assert row.content_type == "application/json"


def test_payload_keeps_given_content_type(broker):
    row = stored(broker, broker.enqueue(spec(payload=b"\x00\xff", content_type="application/octet-stream")).id)
    assert bytes(row.payload) == b"\x00\xff"
    assert row.content_type == "application/octet-stream"


def test_payload_of_exactly_one_mib_is_accepted(broker):
    row = stored(broker, broker.enqueue(spec(payload=b"x" * MIB)).id)
    assert len(bytes(row.payload)) == MIB


def test_metadata_round_trips_as_string_map(broker):
    row = stored(broker, broker.enqueue(spec(metadata={"tenant": "acme", "trace": ""})).id)
    assert row.metadata == {"tenant": "acme", "trace": ""}


def test_metadata_may_be_any_read_only_mapping(broker):
    row = stored(broker, broker.enqueue(spec(metadata=MappingProxyType({"tenant": "acme"}))).id)
    assert row.metadata == {"tenant": "acme"}


def test_running_limits_and_retry_policy_are_stored(broker, clock):
    deadline = clock.now() + timedelta(hours=1)
    task = broker.enqueue(
        spec(timeout=30, deadline=deadline, retention=120, retry_policy=RetrySpec(kind="linear", base=1, cap=10))
    )
    row = stored(broker, task.id)
    assert (row.timeout, row.deadline, row.retention) == (30, deadline, 120)
    assert (row.retry_kind, row.retry_base, row.retry_cap) == ("linear", 1, 10)


# -- initial state -----------------------------------------------------------------


def test_task_without_delay_is_pending_and_due_now(broker, clock):
    task = broker.enqueue(spec())
    row = stored(broker, task.id)
    assert (task.state, row.state) == ("pending", "pending")
    assert row.due_at == row.enqueued_at == clock.now()


def test_future_process_in_is_scheduled_at_now_plus_delay(broker, clock):
    task = broker.enqueue(spec(process_in=90))
    row = stored(broker, task.id)
    assert (task.state, row.state) == ("scheduled", "scheduled")
    assert row.due_at == clock.now() + timedelta(seconds=90)


def test_future_process_at_is_scheduled_at_that_time(broker, clock):
    when = clock.now() + timedelta(minutes=5)
    task = broker.enqueue(spec(process_at=when))
    assert (task.state, stored(broker, task.id).due_at) == ("scheduled", when)


@pytest.mark.parametrize("offset", [0, -60])
def test_process_at_now_or_past_is_pending(broker, clock, offset):
    task = broker.enqueue(spec(process_at=clock.now() + timedelta(seconds=offset)))
    assert (task.state, stored(broker, task.id).state) == ("pending", "pending")


def test_expires_in_is_resolved_to_a_time_at_enqueue(broker, clock):
    task = broker.enqueue(spec(expires_in=300))
    clock.advance(100)
    assert stored(broker, task.id).expires_at == clock.now() + timedelta(seconds=200)


def test_grouped_task_lands_in_aggregating(broker):
    task = broker.enqueue(spec(group="g"))
    row = stored(broker, task.id)
    assert (task.state, row.state, row.group) == ("aggregating", "aggregating", "g")


@pytest.mark.parametrize(
    "kw",
    [{}, {"process_in": 10}, {"group": "g"}, {"unique_key": "k"}],
    ids=["pending", "scheduled", "aggregating", "unique"],
)
def test_returned_task_matches_the_stored_row(broker, kw):
    task = broker.enqueue(spec(**kw))
    row = stored(broker, task.id)
    for field in ("state", "queue", "priority", "due_at", "enqueued_at", "unique_key", "group", "max_retry"):
        assert getattr(task, field) == getattr(row, field), field


# -- wakes and events ------------------------------------------------------------


def test_pending_task_wakes_its_queue(broker, hooks):
    broker.enqueue(spec(queue="mail"))
    assert hooks.woken() == {"mail"}


@pytest.mark.parametrize("kw", [{"process_in": 10}, {"group": "g"}], ids=["scheduled", "aggregating"])
def test_task_that_is_not_due_wakes_no_queue(broker, hooks, kw):
    broker.enqueue(spec(queue="mail", **kw))
    assert hooks.wakes == []


def test_pending_task_emits_enqueued_event(broker, hooks):
    task = broker.enqueue(spec())
    assert event_kinds(hooks, task.id) == ["enqueued"]


def test_scheduled_task_emits_scheduled_event(broker, hooks):
    task = broker.enqueue(spec(process_in=10))
    assert event_kinds(hooks, task.id) == ["scheduled"]
