"""Dependencies: initial state at enqueue, and resolution when dependencies finish."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from conveyor.broker import Broker, Dependency, TaskSpec, dependencies
from conveyor.exceptions import InvalidArgument, InvalidState
from conveyor.notify.hooks import BrokerHooks

CASCADE_ERROR = "canceled by failed dependency"


def spec(**kw) -> TaskSpec:
    kw.setdefault("type", "t")
    return TaskSpec(**kw)


def upstream(broker, task_id: str, **kw):
    """A dependency in a queue of its own, so it can be leased by name."""
    return broker.enqueue(spec(id=task_id, queue=task_id, **kw))


def dependent(broker, task_id: str, *deps: str | tuple[str, str], **kw):
    edges = [Dependency(d) if isinstance(d, str) else Dependency(*d) for d in deps]
    return broker.enqueue(spec(id=task_id, depends_on=edges, **kw))


def lease_one(broker, task_id: str):
    tasks = broker.lease(task_id, 1).tasks
    assert [t.id for t in tasks] == [task_id]
    return tasks[0]


def complete(broker, task_id: str) -> None:
    t = lease_one(broker, task_id)
    broker.ack(t.id, t.lease_id)


def archive(broker, task_id: str) -> None:
    t = lease_one(broker, task_id)
    broker.archive_leased(t.id, t.lease_id, "err")


def state(broker, task_id: str) -> str:
    return broker.get_task(task_id).state


def promotions(hooks, task_id: str) -> int:
    return sum(1 for e in hooks.events if e.kind == "promoted" and e.task_id == task_id)


def assert_rejected(broker, task_spec: TaskSpec, field: str) -> None:
    before = broker.tasks.count()
    with pytest.raises(InvalidArgument) as info:
        broker.enqueue(task_spec)
    assert info.value.field == field
    assert broker.tasks.count() == before


def run_concurrently(*calls) -> None:
    """Run each call in its own thread (own DB connection), all released at once."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call) -> None:
        try:
            barrier.wait()
            call()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


# -- rejected at enqueue ------------------------------------------------------------


def test_dependency_on_unknown_id_is_rejected(broker):
    assert_rejected(broker, spec(depends_on=[Dependency("ghost")]), "depends_on[0].task_id")


def test_unknown_dependency_error_names_its_position(broker):
    upstream(broker, "a")
    assert_rejected(broker, spec(depends_on=[Dependency("a"), Dependency("ghost")]), "depends_on[1].task_id")


def test_dependency_on_itself_is_rejected(broker):
    assert_rejected(broker, spec(id="me", depends_on=[Dependency("me")]), "depends_on[0].task_id")


def test_dependency_listed_twice_is_rejected(broker):
    upstream(broker, "a")
    deps = [Dependency("a"), Dependency("a", "continue")]
    assert_rejected(broker, spec(depends_on=deps), "depends_on[1].task_id")


def test_exactly_1000_dependencies_are_accepted(broker):
    results = broker.enqueue_batch([spec(id=f"d{i:04}") for i in range(1000)])
    assert all(r.ok for r in results)
    task = broker.enqueue(spec(id="join", depends_on=[Dependency(f"d{i:04}") for i in range(1000)]))
    assert task.state == "blocked"
    assert broker.edges.filter(task_id="join").count() == 1000


# -- initial state ---------------------------------------------------------------------


def test_unmet_dependency_leaves_task_blocked_without_wake(broker, hooks):
    upstream(broker, "a")
    hooks.wakes.clear()
    task = dependent(broker, "b", "a", queue="work")
    assert (task.state, state(broker, "b")) == ("blocked", "blocked")
    assert hooks.wakes == []


def test_enqueue_marks_the_dependency_as_having_dependents(broker):
    upstream(broker, "a")
    assert broker.get_task("a").has_dependents is False
    dependent(broker, "b", "a")
    assert broker.get_task("a").has_dependents is True


def test_already_completed_dependency_gives_normal_initial_state(broker, hooks):
    upstream(broker, "a")
    complete(broker, "a")
    task = dependent(broker, "b", "a", queue="work")
    assert (task.state, state(broker, "b")) == ("pending", "pending")
    assert "work" in hooks.woken()


@pytest.mark.parametrize(
    ("kw", "expected"), [({"process_in": 60}, "scheduled"), ({"group": "g"}, "aggregating")], ids=["delay", "group"]
)
def test_already_satisfied_dependency_respects_delay_and_group(broker, kw, expected):
    upstream(broker, "a")
    complete(broker, "a")
    assert dependent(broker, "b", "a", **kw).state == expected
    assert state(broker, "b") == expected


@pytest.mark.parametrize("finish", ["archive", "cancel"])
def test_dependency_already_failed_under_cascade_cancel_is_born_canceled(broker, hooks, finish):
    upstream(broker, "a")
    archive(broker, "a") if finish == "archive" else broker.cancel_task("a")
    hooks.wakes.clear()
    task = dependent(broker, "b", ("a", "cascade_cancel"), queue="work")
    row = broker.get_task("b")
    assert (task.state, row.state, row.last_error) == ("canceled", "canceled", CASCADE_ERROR)
    assert row.finished_at is not None
    assert hooks.wakes == []


def test_dependency_already_failed_under_block_is_blocked(broker):
    upstream(broker, "a")
    archive(broker, "a")
    assert dependent(broker, "b", ("a", "block")).state == "blocked"
    assert state(broker, "b") == "blocked"


def test_dependency_already_failed_under_continue_counts_as_satisfied(broker):
    upstream(broker, "a")
    broker.cancel_task("a")
    assert dependent(broker, "b", ("a", "continue")).state == "pending"


def test_one_unmet_among_satisfied_dependencies_blocks(broker):
    upstream(broker, "a")
    upstream(broker, "b")
    complete(broker, "a")
    assert dependent(broker, "c", "a", "b").state == "blocked"


def test_born_canceled_task_does_not_hold_its_unique_key(broker):
    upstream(broker, "a")
    archive(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"), unique_key="k")
    assert broker.enqueue(spec(unique_key="k")).state == "pending"


# -- resolution -------------------------------------------------------------------------


def test_completing_the_dependency_promotes_dependent_to_pending_and_wakes(broker, hooks):
    upstream(broker, "a")
    dependent(broker, "b", "a", queue="work")
    complete(broker, "a")
    assert state(broker, "b") == "pending"
    assert "work" in hooks.woken()
    assert promotions(hooks, "b") == 1


def test_dependent_enqueued_while_dependency_runs_is_promoted_on_ack(broker):
    upstream(broker, "a")
    t = lease_one(broker, "a")
    dependent(broker, "b", "a")
    broker.ack(t.id, t.lease_id)
    assert state(broker, "b") == "pending"


def test_dependent_enqueued_while_dependency_runs_is_promoted_on_ack_many(broker):
    upstream(broker, "a")
    leased = broker.lease("a", 1).tasks
    dependent(broker, "b", "a")
    broker.ack_many([(t, None) for t in leased])
    assert state(broker, "b") == "pending"


def test_dependent_with_future_due_time_is_promoted_to_scheduled(broker, clock, hooks):
    upstream(broker, "a")
    dependent(broker, "b", "a", queue="work", process_in=60)
    clock.advance(10)
    complete(broker, "a")
    assert state(broker, "b") == "scheduled"
    assert "work" not in hooks.woken()


def test_dependent_whose_due_time_passed_while_blocked_is_promoted_to_pending(broker, clock):
    upstream(broker, "a")
    dependent(broker, "b", "a", process_in=60)
    clock.advance(61)
    complete(broker, "a")
    assert state(broker, "b") == "pending"


def test_grouped_dependent_is_promoted_to_aggregating(broker):
    upstream(broker, "a")
    dependent(broker, "b", "a", group="g")
    complete(broker, "a")
    assert state(broker, "b") == "aggregating"


def test_dependent_stays_blocked_until_every_dependency_completes(broker):
    upstream(broker, "a")
    upstream(broker, "b")
    dependent(broker, "c", "a", "b")
    complete(broker, "a")
    assert state(broker, "c") == "blocked"
    complete(broker, "b")
    assert state(broker, "c") == "pending"


def test_archived_dependency_under_block_keeps_dependent_blocked(broker):
    upstream(broker, "a")
    upstream(broker, "b")
    dependent(broker, "c", ("a", "block"), "b")
    archive(broker, "a")
    complete(broker, "b")
    assert state(broker, "c") == "blocked"


def test_failed_dependency_under_block_that_is_revived_and_completes_promotes_dependent(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "block"))
    archive(broker, "a")
    broker.run_task("a")
    assert state(broker, "b") == "blocked"
    complete(broker, "a")
    assert state(broker, "b") == "pending"


def test_dependency_archived_before_enqueue_under_block_unblocks_when_revived_and_completed(broker):
    upstream(broker, "a")
    archive(broker, "a")
    dependent(broker, "b", ("a", "block"))
    broker.run_task("a")
    complete(broker, "a")
    assert state(broker, "b") == "pending"


def test_revived_dependency_does_not_undo_a_cascade(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"))
    archive(broker, "a")
    broker.run_task("a")
    complete(broker, "a")
    assert state(broker, "b") == "canceled"


def test_archived_dependency_under_continue_counts_as_satisfied(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "continue"))
    archive(broker, "a")
    assert state(broker, "b") == "pending"


def test_archived_dependency_under_cascade_cancel_cancels_dependent(broker, hooks):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"))
    archive(broker, "a")
    row = broker.get_task("b")
    assert (row.state, row.last_error) == ("canceled", CASCADE_ERROR)
    assert [e.kind for e in hooks.events if e.task_id == "b"][-1] == "canceled"


def test_canceled_dependency_under_cascade_cancel_cancels_dependent(broker):
    upstream(broker, "a", process_in=60)
    dependent(broker, "b", ("a", "cascade_cancel"))
    broker.cancel_task("a")
    assert state(broker, "b") == "canceled"


def test_cascade_cancel_runs_down_a_chain(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"))
    dependent(broker, "c", ("b", "cascade_cancel"))
    dependent(broker, "d", ("c", "cascade_cancel"))
    archive(broker, "a")
    assert [state(broker, x) for x in "bcd"] == ["canceled"] * 3
    assert broker.get_task("d").last_error == CASCADE_ERROR


def test_cascade_stops_at_an_edge_that_blocks(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"))
    dependent(broker, "c", ("b", "block"))
    archive(broker, "a")
    assert (state(broker, "b"), state(broker, "c")) == ("canceled", "blocked")


def test_cascade_continues_through_an_edge_that_continues(broker):
    upstream(broker, "a")
    dependent(broker, "b", ("a", "cascade_cancel"))
    dependent(broker, "c", ("b", "continue"))
    archive(broker, "a")
    assert (state(broker, "b"), state(broker, "c")) == ("canceled", "pending")


@pytest.mark.parametrize("policy", ["cascade_cancel", "continue", "block"])
def test_a_task_unfinished_tasks_wait_on_cannot_be_deleted(broker, policy):
    upstream(broker, "a")
    dependent(broker, "b", ("a", policy))
    with pytest.raises(InvalidState) as refused:
        broker.delete_task("a")
    assert refused.value.connect_code == "failed_precondition"
    assert "b" in refused.value.message
    assert (state(broker, "a"), state(broker, "b")) == ("pending", "blocked")
    broker.cancel_task("b")  # once nothing unfinished waits, it goes
    broker.delete_task("a")
    assert not broker.tasks.filter(id="a").exists()


def test_a_finished_dependency_can_be_deleted_under_its_waiting_dependent(broker):
    upstream(broker, "a")
    upstream(broker, "other")
    dependent(broker, "b", "a", "other")
    complete(broker, "a")
    broker.delete_task("a")  # b's edge to it is satisfied: b no longer waits on it
    assert state(broker, "b") == "blocked"


def test_resolving_again_does_not_promote_twice(broker, hooks):
    upstream(broker, "a")
    dependent(broker, "b", "a")
    complete(broker, "a")
    report = broker.resolve_dependents(["a"])
    assert report.count == 0
    assert promotions(hooks, "b") == 1


def test_fan_in_acked_together_promotes_join_once(broker, hooks):
    siblings = [f"s{i}" for i in range(10)]
    for s in siblings:
        broker.enqueue(spec(id=s, queue="fan"))
    dependent(broker, "join", *siblings, queue="work")
    leased = broker.lease("fan", 10).tasks
    broker.ack_many([(t, None) for t in leased])
    assert state(broker, "join") == "pending"
    assert promotions(hooks, "join") == 1


def test_fan_in_acked_from_concurrent_threads_promotes_join_once(broker, hooks, db_alias):
    if db_alias != "postgres":
        pytest.skip("SQLite serializes writers; the race needs PostgreSQL")
    siblings = [f"s{i:02}" for i in range(20)]
    broker.enqueue_batch([spec(id=s, queue="fan") for s in siblings])
    dependent(broker, "join", *siblings, queue="work")
    leased = broker.lease("fan", 20).tasks
    assert len(leased) == 20
    run_concurrently(*[lambda t=t: broker.ack(t.id, t.lease_id) for t in leased])
    assert broker.tasks.filter(queue="fan", state="completed").count() == 20
    assert state(broker, "join") == "pending"
    assert promotions(hooks, "join") == 1
    assert [q for q, _ in hooks.wakes].count("work") == 1


def test_dependent_enqueued_while_dependency_completes_is_never_left_blocked(broker, db_alias):
    if db_alias != "postgres":
        pytest.skip("SQLite serializes writers; the race needs PostgreSQL")
    ups = [f"u{i:02}" for i in range(20)]
    broker.enqueue_batch([spec(id=u, queue="race") for u in ups])
    leased = broker.lease("race", 20).tasks
    acks = [lambda t=t: broker.ack(t.id, t.lease_id) for t in leased]
    enqueues = [lambda u=u: dependent(broker, f"d-{u}", u) for u in ups]
    run_concurrently(*acks, *enqueues)
    assert broker.tasks.filter(queue="race", state="completed").count() == 20
    assert list(broker.tasks.filter(state="blocked").values_list("id", flat=True)) == []


# -- safety net -----------------------------------------------------------------------


def test_promote_ready_dependents_resolves_what_inline_resolution_missed(db_alias, clock):
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    upstream(quiet, "a")
    upstream(quiet, "x")
    dependent(quiet, "b", "a")
    dependent(quiet, "c", ("x", "cascade_cancel"))
    complete(quiet, "a")
    archive(quiet, "x")
    assert (state(quiet, "b"), state(quiet, "c")) == ("blocked", "blocked")
    report = quiet.promote_ready_dependents()
    assert (state(quiet, "b"), state(quiet, "c")) == ("pending", "canceled")
    assert report.count == 1


def test_promote_ready_dependents_leaves_unfinished_dependencies_alone(db_alias, clock):
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    upstream(quiet, "a")
    dependent(quiet, "b", "a")
    assert quiet.promote_ready_dependents().count == 0
    assert state(quiet, "b") == "blocked"


def test_promote_ready_dependents_treats_a_vanished_dependency_as_canceled(db_alias, clock):
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    upstream(quiet, "a")
    dependent(quiet, "b", ("a", "continue"))
    quiet.tasks.filter(id="a").delete()  # a row gone outside the broker (the broker refuses to delete it)
    quiet.promote_ready_dependents()
    assert state(quiet, "b") == "pending"


def test_promote_ready_dependents_finds_finished_dependencies_among_many_live_ones(db_alias, clock, monkeypatch):
    # The sweep looks at a bounded number of dependencies per pass; live
    # ones must not crowd out the finished one.
    monkeypatch.setattr(dependencies, "PASS_LIMIT", 1)
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    for i in range(12):
        upstream(quiet, f"live{i:02}")
        dependent(quiet, f"wait{i:02}", f"live{i:02}")
    upstream(quiet, "zz")
    dependent(quiet, "b", "zz")
    complete(quiet, "zz")
    quiet.promote_ready_dependents()
    assert state(quiet, "b") == "pending"
    assert quiet.tasks.filter(state="blocked").count() == 12


def test_promote_ready_dependents_unblocks_a_revived_and_completed_dependency(db_alias, clock):
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    upstream(quiet, "a")
    dependent(quiet, "b", ("a", "block"))
    archive(quiet, "a")
    quiet.promote_ready_dependents()
    assert state(quiet, "b") == "blocked"
    quiet.run_task("a")
    complete(quiet, "a")
    quiet.promote_ready_dependents()
    assert state(quiet, "b") == "pending"
