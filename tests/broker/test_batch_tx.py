"""Batch (each item alone) and transaction (all or none) enqueue."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from conveyor.broker import Dependency, TaskSpec
from conveyor.exceptions import DuplicateTask, InvalidArgument


def spec(**kw) -> TaskSpec:
    kw.setdefault("type", "t")
    return TaskSpec(**kw)


def dep(*ids: str, on_failure: str = "block") -> list[Dependency]:
    return [Dependency(i, on_failure) for i in ids]


def state(broker, task_id: str) -> str:
    return broker.get_task(task_id).state


def ids(broker) -> set[str]:
    return set(broker.tasks.values_list("id", flat=True))


def tx_error(broker, specs: list[TaskSpec], error: type[Exception] = InvalidArgument):
    """Run a transaction that must fail; check it stored nothing and woke nobody."""
    before, wakes = ids(broker), len(broker.hooks.wakes)
    with pytest.raises(error) as info:
        broker.enqueue_tx(specs)
    assert ids(broker) == before
    assert len(broker.hooks.wakes) == wakes
    return info.value


def run_concurrently(*calls) -> list:
    """Run each call in its own thread (own DB connection), all released at once; return results."""
    barrier = threading.Barrier(len(calls))
    out: list = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait()
            out[i] = calls[i]()
        except BaseException as exc:  # returned to the test
            out[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def needs_postgres(db_alias: str) -> None:
    if db_alias != "postgres":
        pytest.skip("SQLite serializes writers; the race needs PostgreSQL")


# -- batch ---------------------------------------------------------------------------


def test_batch_reports_one_result_per_item_in_order(broker):
    results = broker.enqueue_batch([spec(id="a"), spec(id="b", process_in=5), spec(id="c", group="g")])
    assert [r.index for r in results] == [0, 1, 2]
    assert [(r.task.id, r.task.state, r.created, r.ok) for r in results] == [
        ("a", "pending", True, True),
        ("b", "scheduled", True, True),
        ("c", "aggregating", True, True),
    ]
    assert [state(broker, x) for x in "abc"] == ["pending", "scheduled", "aggregating"]


def test_batch_invalid_item_stores_nothing_and_others_are_stored(broker):
    results = broker.enqueue_batch([spec(id="a"), spec(id="b", priority=12), spec(id="c")])
    bad = results[1]
    assert (bad.ok, bad.task, bad.created) == (False, None, False)
    assert isinstance(bad.error, InvalidArgument)
    assert (bad.error.field, bad.error.index) == ("priority", 1)
    assert ids(broker) == {"a", "c"}


def test_batch_item_colliding_with_stored_unique_key_fails_alone(broker):
    broker.enqueue(spec(id="holder", unique_key="k"))
    results = broker.enqueue_batch([spec(id="a", unique_key="k"), spec(id="b")])
    assert isinstance(results[0].error, DuplicateTask)
    assert (results[0].error.holder_id, results[0].error.index) == ("holder", 0)
    assert results[1].ok
    assert ids(broker) == {"holder", "b"}


def test_batch_second_item_with_same_unique_key_is_duplicate(broker):
    results = broker.enqueue_batch([spec(id="a", unique_key="k"), spec(id="b", unique_key="k")])
    assert results[0].ok
    assert isinstance(results[1].error, DuplicateTask)
    assert results[1].error.holder_id == "a"
    assert ids(broker) == {"a"}


def test_batch_unique_key_of_a_refused_item_stays_free_for_later_items(broker):
    results = broker.enqueue_batch(
        [spec(id="a", unique_key="k", depends_on=dep("ghost")), spec(id="b", unique_key="k")]
    )
    assert isinstance(results[0].error, InvalidArgument)
    assert results[1].ok
    assert broker.get_task("b").unique_key == "k"


def test_batch_item_born_canceled_leaves_its_unique_key_free(broker):
    broker.enqueue(spec(id="up", queue="up"))
    broker.cancel_task("up")
    results = broker.enqueue_batch(
        [spec(id="a", unique_key="k", depends_on=dep("up", on_failure="cascade_cancel")), spec(id="b", unique_key="k")]
    )
    assert [(r.ok, r.task.state) for r in results] == [(True, "canceled"), (True, "pending")]


def test_batch_existing_id_returns_stored_task_unchanged(broker):
    broker.enqueue(spec(id="a", payload=b"old"))
    results = broker.enqueue_batch([spec(id="a", payload=b"new", queue="other"), spec(id="b")])
    assert (results[0].ok, results[0].created, results[0].task.queue) == (True, False, "default")
    assert bytes(broker.get_task("a").payload) == b"old"
    assert results[1].created


def test_batch_repeated_id_first_occurrence_wins(broker):
    results = broker.enqueue_batch([spec(id="a", payload=b"first"), spec(id="a", payload=b"second", priority=9)])
    assert [r.ok for r in results] == [True, True]
    assert [r.created for r in results] == [True, False]
    assert results[1].task.id == "a"
    assert bytes(results[1].task.payload) == b"first"
    row = broker.get_task("a")
    assert (bytes(row.payload), row.priority) == (b"first", 4)
    assert broker.tasks.count() == 1


def test_batch_repeat_of_a_refused_first_occurrence_is_refused_too(broker):
    broker.enqueue(spec(id="holder", unique_key="k"))
    results = broker.enqueue_batch([spec(id="a", unique_key="k"), spec(id="a")])
    assert isinstance(results[0].error, DuplicateTask)
    assert isinstance(results[1].error, DuplicateTask)
    assert "a" not in ids(broker)


def test_batch_item_may_depend_on_an_earlier_item(broker):
    results = broker.enqueue_batch([spec(id="a"), spec(id="b", depends_on=dep("a"))])
    assert [r.task.state for r in results] == ["pending", "blocked"]
    assert broker.get_task("a").has_dependents is True


def test_batch_item_may_not_depend_on_a_later_item(broker):
    results = broker.enqueue_batch([spec(id="a", depends_on=dep("b")), spec(id="b")])
    assert results[0].error.field == "depends_on[0].task_id"
    assert results[0].error.index == 0
    assert results[1].ok
    assert ids(broker) == {"b"}


def test_batch_item_depending_on_a_refused_earlier_item_is_refused(broker):
    results = broker.enqueue_batch([spec(id="a", priority=99), spec(id="b", depends_on=dep("a"))])
    assert results[0].error.field == "priority"
    assert (results[1].error.field, results[1].error.index) == ("depends_on[0].task_id", 1)
    assert ids(broker) == set()


def test_batch_item_depending_on_a_born_canceled_earlier_item_under_cascade_is_canceled(broker):
    broker.enqueue(spec(id="up", queue="up"))
    broker.cancel_task("up")
    results = broker.enqueue_batch(
        [
            spec(id="a", depends_on=dep("up", on_failure="cascade_cancel")),
            spec(id="b", depends_on=dep("a", on_failure="cascade_cancel")),
        ]
    )
    assert [r.task.state for r in results] == ["canceled", "canceled"]


def test_batch_wakes_each_queue_that_gained_pending_work_once(broker, hooks):
    broker.enqueue_batch([spec(queue="a"), spec(queue="a"), spec(queue="b"), spec(queue="c", process_in=60)])
    assert sorted(q for q, _ in hooks.wakes) == ["a", "b"]


def test_empty_batch_is_rejected(broker):
    with pytest.raises(InvalidArgument) as info:
        broker.enqueue_batch([])
    assert info.value.field == "tasks"


def test_batch_of_more_than_1000_items_is_rejected_whole(broker):
    with pytest.raises(InvalidArgument) as info:
        broker.enqueue_batch([spec() for _ in range(1001)])
    assert info.value.field == "tasks"
    assert broker.tasks.count() == 0


def test_batch_of_1000_items_is_accepted(broker):
    results = broker.enqueue_batch([spec() for _ in range(1000)])
    assert all(r.created for r in results)
    assert broker.tasks.count() == 1000


def test_a_large_batch_stores_each_field_as_one_task_stores_it(broker):
    # Above a few rows a batch goes in by COPY (PostgreSQL): metadata as JSON,
    # bytes as they are (any byte, not only text), every option kept.
    options = [
        {"payload": bytes(range(256)), "metadata": {"k": "v", "quote": 'a"b'}},
        {"payload": b"", "metadata": None, "priority": 9, "timeout": 30, "retention": 5},
        {"payload": b"\\x00\t\n\\N", "concurrency_key": "k", "max_retry": 0, "expires_in": 60},
    ]
    batch = broker.enqueue_batch([spec(queue="q", **o) for o in options * 10])
    alone = [broker.enqueue(spec(queue="q", **o)) for o in options]

    def stored(task_id: str) -> dict:
        task = broker.get_task(task_id)
        return {
            name: getattr(task, name)
            for name in ("queue", "type", "priority", "max_retry", "timeout", "retention", "concurrency_key", "state")
        } | {"payload": bytes(task.payload), "metadata": task.metadata, "expires": task.expires_at is not None}

    assert all(r.created for r in batch)
    for i, result in enumerate(batch):
        assert stored(result.task.id) == stored(alone[i % 3].id)
    assert stored(batch[0].task.id)["payload"] == bytes(range(256))


# -- transaction ---------------------------------------------------------------------


def test_tx_stores_every_item_and_returns_them_in_order(broker):
    tasks = broker.enqueue_tx([spec(id="a"), spec(id="b", process_in=5), spec(id="c", group="g")])
    assert [(t.id, t.state) for t in tasks] == [("a", "pending"), ("b", "scheduled"), ("c", "aggregating")]
    assert [state(broker, x) for x in "abc"] == ["pending", "scheduled", "aggregating"]


def test_tx_wakes_queues_with_pending_work(broker, hooks):
    broker.enqueue_tx([spec(queue="a"), spec(queue="b", process_in=5)])
    assert hooks.woken() == {"a"}


def test_tx_invalid_item_stores_nothing_and_reports_its_index(broker):
    error = tx_error(broker, [spec(id="a"), spec(id="b"), spec(id="c", queue="bad queue")])
    assert (error.field, error.index) == ("queue", 2)


def test_tx_collision_with_stored_unique_key_stores_nothing(broker):
    broker.enqueue(spec(id="holder", unique_key="k"))
    error = tx_error(broker, [spec(id="a"), spec(id="b", unique_key="k")], DuplicateTask)
    assert (error.index, error.holder_id) == (1, "holder")


def test_tx_unique_collision_between_two_items_stores_nothing(broker):
    error = tx_error(broker, [spec(id="a", unique_key="k"), spec(id="b"), spec(id="c", unique_key="k")], DuplicateTask)
    assert error.index == 2


def test_tx_unknown_dependency_stores_nothing(broker):
    error = tx_error(broker, [spec(id="a"), spec(id="b", depends_on=dep("a", "ghost"))])
    assert (error.field, error.index) == ("depends_on[1].task_id", 1)


def test_tx_item_may_depend_on_a_later_item(broker):
    tasks = broker.enqueue_tx([spec(id="b", depends_on=dep("a")), spec(id="a")])
    assert [(t.id, t.state) for t in tasks] == [("b", "blocked"), ("a", "pending")]
    assert broker.get_task("a").has_dependents is True


def test_tx_forward_reference_resolves_when_the_later_item_completes(broker):
    broker.enqueue_tx([spec(id="b", depends_on=dep("a")), spec(id="a", queue="up")])
    leased = broker.lease("up", 1).tasks[0]
    broker.ack(leased.id, leased.lease_id)
    assert state(broker, "b") == "pending"


@pytest.mark.parametrize("size", [2, 3])
def test_tx_dependency_cycle_is_rejected(broker, size):
    names = [f"n{i}" for i in range(size)]
    specs = [spec(id=n, depends_on=dep(names[(i + 1) % size])) for i, n in enumerate(names)]
    error = tx_error(broker, specs)
    assert error.field == "depends_on[0].task_id"
    assert error.index in range(size)
    assert "cycle" in error.reason


def test_tx_cycle_behind_a_valid_chain_is_rejected(broker):
    specs = [spec(id="root", depends_on=dep("x")), spec(id="x", depends_on=dep("y")), spec(id="y", depends_on=dep("x"))]
    error = tx_error(broker, specs)
    assert error.index in (1, 2)
    assert "x -> y -> x" in error.reason or "y -> x -> y" in error.reason


def test_tx_diamond_is_not_a_cycle(broker):
    specs = [
        spec(id="join", depends_on=dep("l", "r")),
        spec(id="l", depends_on=dep("top")),
        spec(id="r", depends_on=dep("top")),
        spec(id="top"),
    ]
    states = {t.id: t.state for t in broker.enqueue_tx(specs)}
    assert states == {"join": "blocked", "l": "blocked", "r": "blocked", "top": "pending"}


def test_tx_long_chain_of_forward_references_is_stored(broker):
    n = 1000
    specs = [spec(id=f"c{i:04}", depends_on=dep(f"c{i + 1:04}") if i + 1 < n else ()) for i in range(n)]
    tasks = broker.enqueue_tx(specs)
    assert len(tasks) == n
    assert broker.tasks.filter(state="blocked").count() == n - 1
    assert state(broker, f"c{n - 1:04}") == "pending"


def test_tx_item_under_cascade_on_a_sibling_born_canceled_is_canceled(broker):
    broker.enqueue(spec(id="up", queue="up"))
    broker.cancel_task("up")
    tasks = broker.enqueue_tx(
        [
            spec(id="b", depends_on=dep("a", on_failure="cascade_cancel")),
            spec(id="a", depends_on=dep("up", on_failure="cascade_cancel")),
        ]
    )
    assert [t.state for t in tasks] == ["canceled", "canceled"]


def test_tx_existing_id_returns_stored_task_unchanged(broker):
    broker.enqueue(spec(id="a", payload=b"old"))
    tasks = broker.enqueue_tx([spec(id="a", payload=b"new"), spec(id="b")])
    assert [t.id for t in tasks] == ["a", "b"]
    assert bytes(tasks[0].payload) == b"old"
    assert bytes(broker.get_task("a").payload) == b"old"


def test_tx_repeated_id_first_occurrence_wins(broker):
    tasks = broker.enqueue_tx([spec(id="a", payload=b"first"), spec(id="a", payload=b"second")])
    assert [t.id for t in tasks] == ["a", "a"]
    assert bytes(broker.get_task("a").payload) == b"first"
    assert broker.tasks.count() == 1


def test_tx_of_more_than_1000_items_is_rejected(broker):
    error = tx_error(broker, [spec() for _ in range(1001)])
    assert error.field == "tasks"


def test_empty_tx_is_rejected(broker):
    assert tx_error(broker, []).field == "tasks"


# -- races between concurrent requests -------------------------------------------------


def test_concurrent_batches_racing_for_a_unique_key_get_per_item_answers(broker, db_alias):
    needs_postgres(db_alias)
    n = 8
    calls = [
        lambda i=i: broker.enqueue_batch([spec(id=f"plain{i}"), spec(id=f"k{i}", unique_key="k")]) for i in range(n)
    ]
    outcomes = run_concurrently(*calls)
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    keyed = [results[1] for results in outcomes]
    winners = [r for r in keyed if r.ok]
    assert len(winners) == 1
    for r in keyed:
        if not r.ok:
            assert isinstance(r.error, DuplicateTask)
            assert (r.error.index, r.error.holder_id) == (1, winners[0].task.id)
    assert all(results[0].ok for results in outcomes)
    assert broker.tasks.count() == n + 1


def test_concurrent_transactions_racing_for_a_unique_key_store_one(broker, db_alias):
    needs_postgres(db_alias)
    n = 8
    calls = [lambda i=i: broker.enqueue_tx([spec(id=f"plain{i}"), spec(id=f"k{i}", unique_key="k")]) for i in range(n)]
    outcomes = run_concurrently(*calls)
    stored = [o for o in outcomes if isinstance(o, list)]
    refused = [o for o in outcomes if not isinstance(o, list)]
    assert len(stored) == 1
    assert all(isinstance(e, DuplicateTask) and e.index == 1 for e in refused)
    assert broker.tasks.count() == 2
