"""Unique keys: a live claim refuses a second enqueue until it ends or lapses."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections

from conveyor.broker import Dependency, TaskSpec
from conveyor.exceptions import DuplicateTask


def spec(**kw) -> TaskSpec:
    kw.setdefault("type", "t")
    return TaskSpec(**kw)


def lease_one(broker, queue: str = "default"):
    tasks = broker.lease(queue, 1).tasks
    assert len(tasks) == 1
    return tasks[0]


def assert_duplicate(broker, task_spec: TaskSpec, holder_id: str) -> None:
    before = broker.tasks.count()
    with pytest.raises(DuplicateTask) as info:
        broker.enqueue(task_spec)
    assert info.value.holder_id == holder_id
    assert broker.tasks.count() == before


def hold_in_state(broker, clock, state: str) -> str:
    """Enqueue the key holder "h" (unique key "k") and bring it to *state*."""
    if state == "scheduled":
        broker.enqueue(spec(id="h", unique_key="k", process_in=60))
    elif state == "aggregating":
        broker.enqueue(spec(id="h", unique_key="k", group="g"))
    elif state == "blocked":
        broker.enqueue(spec(id="up", queue="other"))
        broker.enqueue(spec(id="h", unique_key="k", depends_on=[Dependency("up")]))
    else:
        broker.enqueue(spec(id="h", unique_key="k"))
        if state in ("active", "retry"):
            leased = lease_one(broker)
            if state == "retry":
                broker.fail(leased.id, leased.lease_id, clock.now() + timedelta(seconds=30), "boom")
    assert broker.get_task("h").state == state
    return "h"


@pytest.mark.parametrize("state", ["scheduled", "pending", "active", "retry", "aggregating", "blocked"])
def test_live_claim_in_each_incomplete_state_refuses_second_enqueue(broker, clock, state):
    holder = hold_in_state(broker, clock, state)
    assert_duplicate(broker, spec(unique_key="k"), holder)


def test_duplicate_names_the_key_and_the_holder(broker):
    broker.enqueue(spec(id="h", unique_key="report:7"))
    with pytest.raises(DuplicateTask) as info:
        broker.enqueue(spec(unique_key="report:7"))
    assert (info.value.unique_key, info.value.holder_id) == ("report:7", "h")


def test_duplicate_sends_no_wake(broker, hooks):
    broker.enqueue(spec(id="h", unique_key="k", process_in=60))
    with pytest.raises(DuplicateTask):
        broker.enqueue(spec(unique_key="k"))
    assert hooks.wakes == []


def test_repeated_id_of_the_holder_is_idempotent_not_duplicate(broker):
    broker.enqueue(spec(id="h", unique_key="k"))
    assert broker.enqueue(spec(id="h", unique_key="k")).id == "h"
    assert broker.tasks.count() == 1


def test_held_key_refuses_even_a_task_that_would_be_born_canceled(broker):
    broker.enqueue(spec(id="h", unique_key="k"))
    broker.enqueue(spec(id="up", queue="up"))
    broker.cancel_task("up")
    assert_duplicate(broker, spec(unique_key="k", depends_on=[Dependency("up", "cascade_cancel")]), "h")


def test_completing_the_holder_frees_the_key(broker):
    broker.enqueue(spec(id="h", unique_key="k"))
    leased = lease_one(broker)
    broker.ack(leased.id, leased.lease_id)
    assert broker.enqueue(spec(unique_key="k")).state == "pending"


def test_archiving_the_holder_frees_the_key(broker):
    broker.enqueue(spec(id="h", unique_key="k"))
    leased = lease_one(broker)
    broker.archive_leased(leased.id, leased.lease_id, "err")
    assert broker.enqueue(spec(unique_key="k")).state == "pending"


def test_canceling_the_holder_frees_the_key(broker):
    broker.enqueue(spec(id="h", unique_key="k", process_in=60))
    broker.cancel_task("h")
    assert broker.enqueue(spec(unique_key="k")).state == "pending"


def test_deleting_the_holder_frees_the_key(broker):
    broker.enqueue(spec(id="h", unique_key="k"))
    broker.delete_task("h")
    assert broker.enqueue(spec(unique_key="k")).state == "pending"


def test_ttl_claim_is_live_just_before_enqueue_time_plus_ttl(broker, clock):
    broker.enqueue(spec(id="h", unique_key="k", unique_ttl=60))
    clock.advance(59.999)
    assert_duplicate(broker, spec(unique_key="k"), "h")


def test_ttl_claim_lapses_at_enqueue_time_plus_ttl(broker, clock):
    broker.enqueue(spec(id="h", unique_key="k", unique_ttl=60))
    clock.advance(60)
    task = broker.enqueue(spec(unique_key="k"))
    assert task.state == "pending"
    assert broker.get_task("h").state == "pending"


def test_ttl_claim_lapses_even_while_the_holder_runs(broker, clock):
    broker.enqueue(spec(id="h", unique_key="k", unique_ttl=10))
    lease_one(broker)
    clock.advance(10)
    broker.enqueue(spec(id="second", unique_key="k"))
    assert broker.get_task("h").state == "active"
    assert broker.get_task("second").unique_key == "k"


def test_new_claim_after_lapse_is_itself_live(broker, clock):
    broker.enqueue(spec(id="h", unique_key="k", unique_ttl=10))
    clock.advance(10)
    broker.enqueue(spec(id="second", unique_key="k"))
    clock.advance(1000)
    assert_duplicate(broker, spec(unique_key="k"), "second")


def test_unique_flag_derives_sha256_key_from_type_and_payload(broker):
    task = broker.enqueue(spec(type="mail", payload=b'{"to": "x"}', unique=True))
    row = broker.get_task(task.id)
    assert row.unique_key.startswith("sha256:")
    assert len(row.unique_key) == len("sha256:") + 64
    assert row.unique_key == task.unique_key


def test_unique_flag_refuses_same_type_and_payload(broker):
    first = broker.enqueue(spec(type="mail", payload=b"{}", unique=True))
    assert_duplicate(broker, spec(type="mail", payload=b"{}", unique=True), first.id)


@pytest.mark.parametrize("other", [{"type": "mail", "payload": b"[]"}, {"type": "sms", "payload": b"{}"}])
def test_unique_flag_allows_different_type_or_payload(broker, other):
    first = broker.enqueue(spec(type="mail", payload=b"{}", unique=True))
    second = broker.enqueue(spec(unique=True, **other))
    assert first.unique_key != second.unique_key
    assert broker.tasks.count() == 2


def test_unique_flag_keeps_type_and_payload_apart(broker):
    # ("ab", "c") and ("a", "bc") concatenate alike but are different tasks.
    broker.enqueue(spec(type="ab", payload=b"c", unique=True))
    broker.enqueue(spec(type="a", payload=b"bc", unique=True))
    assert broker.tasks.count() == 2


def test_explicit_key_wins_over_unique_flag(broker):
    task = broker.enqueue(spec(unique_key="mine", unique=True))
    assert broker.get_task(task.id).unique_key == "mine"


def test_unique_flag_with_ttl_lapses(broker, clock):
    broker.enqueue(spec(payload=b"{}", unique=True, unique_ttl=5))
    clock.advance(5)
    broker.enqueue(spec(payload=b"{}", unique=True))
    assert broker.tasks.count() == 2


def test_concurrent_enqueues_with_one_key_store_exactly_one(broker, db_alias):
    if db_alias != "postgres":
        pytest.skip("SQLite serializes writers; the race needs PostgreSQL")
    n = 10
    barrier = threading.Barrier(n)
    outcomes: list = []

    def enqueue(i: int) -> None:
        try:
            barrier.wait()
            outcomes.append(broker.enqueue(spec(id=f"t{i}", unique_key="k")))
        except BaseException as exc:  # checked below
            outcomes.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stored = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(stored) == 1
    assert all(isinstance(o, DuplicateTask) and o.holder_id == stored[0].id for o in outcomes if o not in stored)
    assert broker.tasks.count() == 1
