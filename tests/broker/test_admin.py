"""Operator actions: cancel, archive, delete, run now, reschedule, and their batch forms."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor.broker import Dependency
from conveyor.exceptions import DuplicateTask, InvalidArgument, InvalidState, TaskNotFound
from conveyor.states import State
from tests.broker.factories import all_snapshots, enqueue, lease_one, reload, snapshot


def make_task(broker, clock, state: str):
    """A task in *state*, built through the broker's own transitions."""
    if state == State.PENDING:
        return enqueue(broker)
    if state == State.SCHEDULED:
        return enqueue(broker, process_in=3600)
    if state == State.AGGREGATING:
        return enqueue(broker, group="g")
    if state == State.BLOCKED:
        upstream = enqueue(broker, queue="upstream")
        return enqueue(broker, depends_on=[Dependency(upstream.id)])
    if state == State.CANCELED:
        task = enqueue(broker)
        broker.cancel_task(task.id)
        return task
    leased = lease_one(broker, enqueue(broker, queue="work").queue)
    if state == State.RETRY:
        broker.fail(leased.id, leased.lease_id, clock.now() + timedelta(seconds=60), "boom")
    elif state == State.COMPLETED:
        broker.ack(leased.id, leased.lease_id)
    elif state == State.ARCHIVED:
        broker.archive_leased(leased.id, leased.lease_id, "poison")
    return leased


WAITING = [State.SCHEDULED, State.PENDING, State.RETRY, State.AGGREGATING, State.BLOCKED]


def test_actions_on_an_unknown_task_raise_not_found(broker):
    for action in (broker.get_task, broker.cancel_task, broker.archive_task, broker.delete_task, broker.run_task):
        with pytest.raises(TaskNotFound):
            action("missing")
    with pytest.raises(TaskNotFound):
        broker.reschedule_task("missing", process_in=5)


# -- cancel ---------------------------------------------------------------------------


def test_cancel_moves_a_task_in_any_waiting_state_to_canceled(broker, clock):
    tasks = {state: make_task(broker, clock, state) for state in WAITING}
    assert {s: reload(broker, t.id).state for s, t in tasks.items()} == {s: s for s in WAITING}

    for task in tasks.values():
        broker.cancel_task(task.id)

    for task in tasks.values():
        stored = reload(broker, task.id)
        assert (stored.state, stored.finished_at) == (State.CANCELED, clock.now())


def test_cancel_of_a_finished_task_is_invalid_state_and_changes_nothing(broker, clock):
    for state in (State.COMPLETED, State.ARCHIVED, State.CANCELED):
        task = make_task(broker, clock, state)
        before = snapshot(broker, task.id)

        with pytest.raises(InvalidState):
            broker.cancel_task(task.id)

        assert snapshot(broker, task.id) == before


def test_cancel_frees_the_unique_key(broker):
    task = enqueue(broker, unique_key="k")
    broker.cancel_task(task.id)

    again = enqueue(broker, unique_key="k")

    assert again.id != task.id and again.state == State.PENDING


def test_cancel_of_a_running_task_keeps_it_active_and_asks_its_worker_to_stop(broker, hooks):
    enqueue(broker)
    leased = lease_one(broker)

    broker.cancel_task(leased.id)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.cancel_requested, stored.lease_id) == (State.ACTIVE, True, leased.lease_id)
    assert hooks.cancels == [(leased.id, leased.lease_id)]


def test_a_running_task_canceled_then_acked_completes(broker):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)

    broker.ack(leased.id, leased.lease_id, b"done anyway")

    assert reload(broker, leased.id).state == State.COMPLETED


def test_a_running_task_canceled_then_failed_ends_archived(broker):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)

    broker.settle_failure(leased.id, leased.lease_id, "interrupted")

    stored = reload(broker, leased.id)
    assert stored.state == State.ARCHIVED
    assert stored.last_error == "canceled while running: interrupted"


def test_a_running_task_canceled_then_released_ends_archived(broker):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)

    broker.release(leased.id, leased.lease_id)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, "canceled while running")


def test_a_running_task_canceled_then_lease_expired_ends_archived(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)
    clock.advance(61)

    broker.reap_expired_leases()

    stored = reload(broker, leased.id)
    assert (stored.state, stored.last_error) == (State.ARCHIVED, "canceled while running")


# -- archive ----------------------------------------------------------------------------


def test_admin_archive_works_from_every_waiting_state_and_canceled(broker, clock):
    for state in (*WAITING, State.CANCELED):
        task = make_task(broker, clock, state)

        broker.archive_task(task.id)

        stored = reload(broker, task.id)
        assert (stored.state, stored.finished_at) == (State.ARCHIVED, clock.now()), state


def test_admin_archive_of_completed_archived_or_active_is_invalid_state(broker, clock):
    enqueue(broker)
    tasks = [lease_one(broker), make_task(broker, clock, State.COMPLETED), make_task(broker, clock, State.ARCHIVED)]
    before = {t.id: snapshot(broker, t.id) for t in tasks}

    for task in tasks:
        with pytest.raises(InvalidState):
            broker.archive_task(task.id)

    assert {t.id: snapshot(broker, t.id) for t in tasks} == before


# -- delete -----------------------------------------------------------------------------


def test_delete_removes_a_task_in_any_state_but_active(broker, clock):
    states = [s for s in State if s != State.ACTIVE]
    tasks = [make_task(broker, clock, state) for state in states]
    assert sorted(reload(broker, t.id).state for t in tasks) == sorted(states)

    for task in tasks:
        broker.delete_task(task.id)

    assert not broker.tasks.filter(id__in=[t.id for t in tasks]).exists()


def test_delete_of_an_active_task_is_invalid_state_and_keeps_it(broker):
    enqueue(broker)
    leased = lease_one(broker)
    before = snapshot(broker, leased.id)

    with pytest.raises(InvalidState):
        broker.delete_task(leased.id)

    assert snapshot(broker, leased.id) == before


def test_delete_publishes_a_deleted_event_naming_the_task(broker, hooks):
    task = enqueue(broker)

    broker.delete_task(task.id)

    assert [(e.kind, e.task_id) for e in hooks.events if e.kind == "deleted"] == [("deleted", task.id)]


# -- run now -------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [State.SCHEDULED, State.PENDING, State.RETRY, State.ARCHIVED])
def test_run_now_makes_the_task_pending_and_due_now(broker, clock, state):
    task = make_task(broker, clock, state)
    retried = reload(broker, task.id).retried
    clock.advance(5)

    broker.run_task(task.id)

    stored = reload(broker, task.id)
    assert (stored.state, stored.due_at, stored.retried) == (State.PENDING, clock.now(), retried)
    assert lease_one(broker, stored.queue).id == task.id


def test_run_now_of_an_archived_task_keeps_its_retry_count(broker, clock):
    enqueue(broker, max_retry=1)
    leased = lease_one(broker)
    broker.fail(leased.id, leased.lease_id, clock.now(), "one")
    leased = lease_one(broker)
    broker.settle_failure(leased.id, leased.lease_id, "two")
    assert reload(broker, leased.id).state == State.ARCHIVED

    broker.run_task(leased.id)

    stored = reload(broker, leased.id)
    assert (stored.state, stored.retried, stored.finished_at) == (State.PENDING, 1, None)


def test_run_now_of_a_task_canceled_while_running_starts_a_clean_attempt(broker):
    enqueue(broker)
    leased = lease_one(broker)
    broker.cancel_task(leased.id)
    broker.release(leased.id, leased.lease_id)  # ends archived: canceled while running

    broker.run_task(leased.id)
    again = lease_one(broker)
    broker.release(again.id, again.lease_id)

    assert reload(broker, again.id).state == State.PENDING


def test_run_now_from_other_states_is_invalid_state_and_changes_nothing(broker, clock):
    enqueue(broker, queue="run")
    tasks = [lease_one(broker, "run")]
    tasks += [make_task(broker, clock, s) for s in (State.COMPLETED, State.CANCELED, State.AGGREGATING, State.BLOCKED)]
    before = all_snapshots(broker)

    for task in tasks:
        with pytest.raises(InvalidState):
            broker.run_task(task.id)

    assert all_snapshots(broker) == before


def test_run_now_of_an_archived_task_whose_unique_key_was_taken_is_duplicate(broker):
    old = enqueue(broker, unique_key="k")
    broker.archive_task(old.id)
    enqueue(broker, unique_key="k")
    before = snapshot(broker, old.id)

    with pytest.raises(DuplicateTask):
        broker.run_task(old.id)

    assert snapshot(broker, old.id) == before


# -- reschedule --------------------------------------------------------------------------


def test_reschedule_to_the_future_makes_the_task_scheduled(broker, clock):
    task = enqueue(broker)
    when = clock.now() + timedelta(hours=2)

    broker.reschedule_task(task.id, process_at=when)

    stored = reload(broker, task.id)
    assert (stored.state, stored.due_at) == (State.SCHEDULED, when)


def test_reschedule_with_process_in_counts_from_now(broker, clock):
    task = make_task(broker, clock, State.RETRY)

    broker.reschedule_task(task.id, process_in=90)

    stored = reload(broker, task.id)
    assert (stored.state, stored.due_at, stored.retried) == (State.SCHEDULED, clock.now() + timedelta(seconds=90), 1)


def test_reschedule_to_the_past_makes_a_scheduled_task_pending(broker, clock):
    task = enqueue(broker, process_in=3600)
    when = clock.now() - timedelta(minutes=1)

    broker.reschedule_task(task.id, process_at=when)

    stored = reload(broker, task.id)
    assert (stored.state, stored.due_at) == (State.PENDING, when)


def test_reschedule_with_bad_times_is_invalid_argument_and_changes_nothing(broker, clock):
    task = enqueue(broker)
    before = snapshot(broker, task.id)
    bad = [
        ({}, "process_at"),
        ({"process_in": 5, "process_at": clock.now()}, "process_at"),
        ({"process_in": -1}, "process_in"),
        ({"process_in": float("nan")}, "process_in"),
        ({"process_at": clock.now().replace(tzinfo=None)}, "process_at"),
    ]

    for times, field in bad:
        with pytest.raises(InvalidArgument) as err:
            broker.reschedule_task(task.id, **times)
        assert err.value.field == field, times
        with pytest.raises(InvalidArgument):
            broker.reschedule_tasks([task.id], **times)

    assert snapshot(broker, task.id) == before


def test_reschedule_outside_scheduled_pending_retry_is_invalid_state(broker, clock):
    states = (State.COMPLETED, State.ARCHIVED, State.CANCELED, State.AGGREGATING, State.BLOCKED)
    tasks = [make_task(broker, clock, s) for s in states]
    before = all_snapshots(broker)

    for task in tasks:
        with pytest.raises(InvalidState):
            broker.reschedule_task(task.id, process_in=10)

    assert all_snapshots(broker) == before


# -- batch forms ----------------------------------------------------------------------------


def test_batch_cancel_answers_per_id(broker, clock):
    waiting = enqueue(broker)
    done = make_task(broker, clock, State.COMPLETED)

    results = broker.cancel_tasks([waiting.id, done.id, "missing"])

    assert [r.id for r in results] == [waiting.id, done.id, "missing"]
    assert results[0].ok and results[0].task.state == State.CANCELED
    assert isinstance(results[1].error, InvalidState)
    assert isinstance(results[2].error, TaskNotFound)
    assert reload(broker, done.id).state == State.COMPLETED


def test_batch_delete_run_archive_and_reschedule_answer_per_id(broker, clock):
    a, b, c, d = (enqueue(broker) for _ in range(4))

    assert [r.ok for r in broker.archive_tasks([a.id, "missing"])] == [True, False]
    assert [r.ok for r in broker.run_tasks([a.id, b.id])] == [True, True]
    assert [r.ok for r in broker.reschedule_tasks([c.id, "missing"], process_in=60)] == [True, False]
    assert [r.ok for r in broker.delete_tasks([d.id, d.id])] == [True, False]
    assert reload(broker, a.id).state == State.PENDING
    assert reload(broker, c.id).state == State.SCHEDULED
    assert not broker.tasks.filter(id=d.id).exists()


def test_batch_with_bad_ids_is_invalid_argument_and_changes_nothing(broker):
    task = enqueue(broker, id="ok")
    before = all_snapshots(broker)

    for ids, field in [([], "ids"), ("ok", "ids"), (["ok", ""], "ids[1]"), (["ok", "bad id"], "ids[1]")]:
        with pytest.raises(InvalidArgument) as err:
            broker.cancel_tasks(ids)
        assert err.value.field == field

    assert all_snapshots(broker) == before
    assert reload(broker, task.id).state == State.PENDING


def test_batch_takes_at_most_1000_ids(broker):
    task = enqueue(broker)
    # 999 unknown ids answer not-found one by one; the known one is canceled.
    results = broker.cancel_tasks([f"missing-{i}" for i in range(999)] + [task.id])
    assert len(results) == 1000 and results[-1].ok
    assert sum(isinstance(r.error, TaskNotFound) for r in results) == 999

    with pytest.raises(InvalidArgument) as err:
        broker.run_tasks([task.id] * 1001)

    assert err.value.field == "ids"
    assert reload(broker, task.id).state == State.CANCELED
