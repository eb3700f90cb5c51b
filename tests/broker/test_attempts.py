"""Attempt history through the broker: every outcome path records the attempt it ends."""

from __future__ import annotations

import pytest
from django.test import override_settings

from conveyor.broker.crashes import WORKER_LOST
from conveyor.broker.sweeps import LEASE_EXPIRED
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.models import TaskAttempt
from conveyor.store import Runner
from tests.broker.factories import enqueue, lease_one, on_loop

WORKER = Runner("sess-1", {"host": "w1"}, "node-a")


def history(broker, task_id):
    """(number, outcome, session, node, error) of each attempt, oldest first."""
    rows = TaskAttempt.objects.using(broker.db).filter(task_id=task_id).order_by("number")
    return [(a.number, a.outcome, a.worker_session, a.node, a.error) for a in rows]


def test_an_ack_records_a_completed_attempt_with_its_worker_and_times(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    started = clock.now()
    clock.advance(3)

    assert broker.ack_many([(leased, None, WORKER)]) == []

    (attempt,) = TaskAttempt.objects.using(broker.db).filter(task_id=leased.id)
    assert (attempt.number, attempt.outcome, attempt.worker_labels) == (1, "completed", {"host": "w1"})
    assert (attempt.started_at, attempt.finished_at) == (started, clock.now())


def test_failures_record_retry_then_failed_with_the_workers_error(broker):
    task = enqueue(broker, max_retry=1)
    for error in ["Traceback ...\nValueError: one", "Traceback ...\nValueError: two"]:
        leased = lease_one(broker)
        broker.settle_failure(leased.id, leased.lease_id, error, delay=0, by=WORKER)

    assert history(broker, task.id) == [
        (1, "retry", "sess-1", "node-a", "Traceback ...\nValueError: one"),
        (2, "failed", "sess-1", "node-a", "Traceback ...\nValueError: two"),
    ]
    # The task's last error says why it was archived; the attempt keeps what the worker sent.
    assert broker.get_task(task.id).last_error == "retries exhausted: Traceback ...\nValueError: two"


def test_fail_and_skip_retry_record_their_attempts(broker, clock):
    task = enqueue(broker)
    leased = lease_one(broker)
    broker.fail(leased.id, leased.lease_id, clock.now(), "once", by=WORKER)
    leased = lease_one(broker)
    broker.archive_leased(leased.id, leased.lease_id, "for good")

    # No runner named (an API caller): the node is the lease holder's.
    assert history(broker, task.id) == [(1, "retry", "sess-1", "node-a", "once"), (2, "failed", "", "", "for good")]


def test_a_release_by_a_worker_records_one_and_a_release_of_an_undelivered_task_none(broker):
    task = enqueue(broker)
    leased = lease_one(broker)
    broker.release_many([(leased.id, leased.lease_id)], by=WORKER)
    leased = lease_one(broker)
    broker.release_many([(leased.id, leased.lease_id)])

    assert history(broker, task.id) == [(1, "released", "sess-1", "node-a", "")]


def test_a_crash_records_crashed_for_each_started_task_and_nothing_for_idle_ones(broker):
    a, b, idle = (enqueue(broker) for _ in range(3))
    leased = {t.id: t for t in broker.lease("default", 3).tasks}

    broker.settle_crash(
        [(a.id, leased[a.id].lease_id), (b.id, leased[b.id].lease_id)], idle=[(idle.id, leased[idle.id].lease_id)],
        by=WORKER,
    )  # fmt: skip

    assert history(broker, a.id) == history(broker, b.id) == [(1, "crashed", "sess-1", "node-a", WORKER_LOST)]
    assert history(broker, idle.id) == []


def test_a_charged_crash_records_crashed(broker):
    task = enqueue(broker)
    leased = lease_one(broker)

    broker.settle_crash([(leased.id, leased.lease_id)], by=WORKER)

    assert history(broker, task.id) == [(1, "crashed", "sess-1", "node-a", WORKER_LOST)]


def test_an_expired_lease_reaped_records_lease_expired_on_its_holder(broker, clock):
    task = enqueue(broker, max_retry=0)
    broker.lease("default", 1, holder="node-b")
    clock.advance(61)

    broker.reap_expired_leases()

    assert history(broker, task.id) == [(1, "lease-expired", "", "node-b", LEASE_EXPIRED)]


def test_only_the_last_attempts_kept_remain(broker):
    task = enqueue(broker)
    with override_settings(CONVEYOR={"ATTEMPTS_KEPT": 2}):
        for i in range(4):
            leased = lease_one(broker)
            broker.settle_failure(leased.id, leased.lease_id, f"e{i}", delay=0)

    assert [(n, e) for n, _o, _s, _n, e in history(broker, task.id)] == [(3, "e2"), (4, "e3")]


@pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)
def test_an_ack_on_the_loop_records_the_attempt_in_its_one_statement(broker):
    enqueue(broker)
    leased = lease_one(broker)

    assert on_loop(LoopLeaser(broker), lambda leaser: leaser.ack([(leased, b"{}", WORKER)])) == []

    assert history(broker, leased.id) == [(1, "completed", "sess-1", "node-a", "")]


def test_a_failures_traceback_goes_to_its_attempt_after_the_error_not_to_last_error(broker):
    task = enqueue(broker)
    leased = lease_one(broker)

    broker.settle_failure(
        leased.id, leased.lease_id, "ValueError: no", traceback="Traceback (most recent call last):\n  ...\n"
    )

    assert history(broker, task.id)[0][4] == "ValueError: no\n\nTraceback (most recent call last):\n  ...\n"
    assert broker.get_task(task.id).last_error == "ValueError: no"
