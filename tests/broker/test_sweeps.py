"""Sweeps: reaping expired leases, promotion, pre-dispatch expiry, purge, pending counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from conveyor.broker import Broker, Dependency
from conveyor.exceptions import LeaseLost, TaskNotFound
from conveyor.notify.hooks import BrokerHooks
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one, reload, snapshot

DAY = 86400

# -- reap expired leases -------------------------------------------------------------


def test_reap_moves_an_expired_lease_to_retry_due_now(broker, clock):
    enqueue(broker, queue="mail")
    leased = lease_one(broker, "mail")
    clock.advance(61)

    report = broker.reap_expired_leases()

    stored = reload(broker, leased.id)
    assert (stored.state, stored.retried, stored.last_error) == (State.RETRY, 1, "lease expired")
    assert stored.due_at == clock.now()
    assert (report.count, report.queues) == (1, {"mail"})


def test_reap_leaves_a_lease_that_has_not_expired(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(59)
    before = snapshot(broker, leased.id)

    report = broker.reap_expired_leases()

    assert report.count == 0
    assert snapshot(broker, leased.id) == before


def test_an_extended_lease_survives_the_reap(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(50)
    broker.extend(leased.id, leased.lease_id)
    clock.advance(50)

    broker.reap_expired_leases()

    assert reload(broker, leased.id).state == State.ACTIVE


def test_ack_after_the_lease_was_reaped_raises_lease_lost(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    clock.advance(61)
    broker.reap_expired_leases()
    before = snapshot(broker, leased.id)

    with pytest.raises(LeaseLost):
        broker.ack(leased.id, leased.lease_id)

    assert snapshot(broker, leased.id) == before


def test_reap_archives_an_expired_lease_with_no_retries_left(broker, clock):
    enqueue(broker, max_retry=1)
    leased = lease_one(broker)
    broker.fail(leased.id, leased.lease_id, clock.now(), "boom")
    lease_one(broker)
    clock.advance(61)

    broker.reap_expired_leases()

    stored = reload(broker, leased.id)
    assert stored.state == State.ARCHIVED
    assert stored.last_error == "retries exhausted: lease expired"
    assert stored.finished_at == clock.now()


# -- promote scheduled -----------------------------------------------------------------


def test_promote_scheduled_makes_due_tasks_pending_and_reports_their_queues(broker, clock, hooks):
    due = enqueue(broker, queue="a", process_in=10)
    later = enqueue(broker, queue="b", process_in=60)
    clock.advance(10)

    report = broker.promote_scheduled()

    assert reload(broker, due.id).state == State.PENDING
    assert reload(broker, later.id).state == State.SCHEDULED
    assert (report.count, report.queues) == (1, {"a"})
    assert "a" in hooks.woken()


def test_promoted_task_is_leasable(broker, clock):
    task = enqueue(broker, process_in=5)
    clock.advance(5)
    broker.promote_scheduled()

    assert lease_one(broker).id == task.id


# -- archive expired ---------------------------------------------------------------------


def test_archive_expired_archives_waiting_tasks_past_their_expiry(broker, clock):
    pending = enqueue(broker, expires_in=30)
    scheduled = enqueue(broker, process_in=60, expires_in=30)
    grouped = enqueue(broker, group="g", expires_in=30)
    fresh = enqueue(broker, expires_in=300)
    clock.advance(30)

    report = broker.archive_expired()

    assert report.count == 3
    for task in (pending, scheduled, grouped):
        stored = reload(broker, task.id)
        assert (stored.state, stored.last_error) == (State.ARCHIVED, "task expired before dispatch")
        assert stored.finished_at == clock.now()
    assert reload(broker, fresh.id).state == State.PENDING


def test_archive_expired_leaves_a_running_task(broker, clock):
    enqueue(broker, expires_in=30)
    leased = lease_one(broker)
    clock.advance(31)

    broker.archive_expired()

    assert reload(broker, leased.id).state == State.ACTIVE


# -- purge ---------------------------------------------------------------------------------


def _completed(broker, **fields):
    enqueue(broker, **fields)
    leased = lease_one(broker)
    broker.ack(leased.id, leased.lease_id)
    return leased


def test_purge_deletes_completed_tasks_on_the_next_pass_by_default(broker):
    done = _completed(broker)
    waiting = enqueue(broker)

    report = broker.purge()

    assert report.count == 1
    with pytest.raises(TaskNotFound):
        broker.get_task(done.id)
    assert reload(broker, waiting.id).state == State.PENDING


def test_purge_keeps_a_completed_task_until_its_own_retention_passes(broker, clock):
    done = _completed(broker, retention=3600)

    clock.advance(3599)
    broker.purge()
    assert reload(broker, done.id).state == State.COMPLETED

    clock.advance(1)
    broker.purge()
    with pytest.raises(TaskNotFound):
        broker.get_task(done.id)


@override_settings(CONVEYOR={"COMPLETED_RETENTION": 600})
def test_purge_uses_the_server_completed_retention_when_the_task_has_none(broker, clock):
    done = _completed(broker)

    clock.advance(599)
    broker.purge()
    assert reload(broker, done.id).state == State.COMPLETED
    clock.advance(1)
    broker.purge()
    assert not broker.tasks.filter(id=done.id).exists()


def test_purge_keeps_archived_and_canceled_tasks_for_the_archive_retention(broker, clock):
    archived = enqueue(broker)
    broker.archive_task(archived.id)
    canceled = enqueue(broker)
    broker.cancel_task(canceled.id)

    clock.advance(7 * DAY - 1)
    broker.purge()
    assert broker.tasks.filter(id__in=[archived.id, canceled.id]).count() == 2

    clock.advance(1)
    assert broker.purge().count == 2
    assert not broker.tasks.filter(id__in=[archived.id, canceled.id]).exists()


@override_settings(CONVEYOR={"ARCHIVE_RETENTION": 60})
def test_purge_follows_the_archive_retention_setting(broker, clock):
    task = enqueue(broker)
    broker.archive_task(task.id)
    clock.advance(60)

    broker.purge()

    assert not broker.tasks.filter(id=task.id).exists()


def test_purge_keeps_a_finished_task_an_unresolved_dependency_edge_still_needs(broker, clock, db_alias):
    upstream = enqueue(broker)
    dependent = enqueue(broker, depends_on=[Dependency(upstream.id)])
    # Complete the upstream without resolving its dependents (a lost resolution).
    quiet = Broker(clock=clock, using=db_alias, hooks=BrokerHooks())
    leased = lease_one(quiet)
    quiet.ack(leased.id, leased.lease_id)

    broker.purge()
    assert reload(broker, upstream.id).state == State.COMPLETED
    assert reload(broker, dependent.id).state == State.BLOCKED

    broker.resolve_dependents([upstream.id])
    broker.purge()
    assert not broker.tasks.filter(id=upstream.id).exists()
    assert reload(broker, dependent.id).state == State.PENDING


def test_purge_deletes_a_finished_dependent_together_with_its_own_edges(broker, clock):
    upstream = enqueue(broker)
    dependent = enqueue(broker, depends_on=[Dependency(upstream.id)])
    for _ in range(2):  # the upstream, then the dependent it released
        leased = lease_one(broker)
        broker.ack(leased.id, leased.lease_id)
    assert broker.edges.filter(task_id=dependent.id).exists()

    report = broker.purge()

    assert report.count == 2
    assert not broker.tasks.filter(id__in=[upstream.id, dependent.id]).exists()
    assert not broker.edges.filter(task_id=dependent.id).exists()


def test_purge_frees_lapsed_unique_claims(broker, clock):
    holder = enqueue(broker, unique_key="report-42", unique_ttl=60)
    clock.advance(60)

    broker.purge()

    stored = reload(broker, holder.id)
    assert stored.unique_key is None
    assert stored.state == State.PENDING


def test_purge_keeps_live_unique_claims(broker, clock):
    holder = enqueue(broker, unique_key="report-42", unique_ttl=60)
    clock.advance(59)

    broker.purge()

    assert reload(broker, holder.id).unique_key == "report-42"


# -- pending counts ------------------------------------------------------------------------


def test_pending_counts_counts_due_pending_and_retry_tasks_per_queue(broker, clock):
    enqueue(broker, queue="a")
    enqueue(broker, queue="a")
    enqueue(broker, queue="b")
    enqueue(broker, queue="c")
    failed = lease_one(broker, "c")
    broker.fail(failed.id, failed.lease_id, clock.now(), "boom")  # retry, due now
    enqueue(broker, queue="d", process_in=60)  # scheduled
    enqueue(broker, queue="d", expires_in=1)  # about to expire
    enqueue(broker, queue="e")
    lease_one(broker, "e")  # active
    clock.advance(1)

    assert broker.pending_counts() == {"a": 2, "b": 1, "c": 1}


def test_pending_counts_skips_retries_not_yet_due(broker, clock):
    enqueue(broker)
    leased = lease_one(broker)
    broker.fail(leased.id, leased.lease_id, clock.now() + timedelta(seconds=30), "boom")

    assert broker.pending_counts() == {}
