"""Bulk actions on a filter: counted when asked, done in batches, changed rows skipped and counted."""

from __future__ import annotations

import pytest

from conveyor.broker import Dependency
from conveyor.exceptions import InvalidArgument
from conveyor.models import BulkJob
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one


def states(broker, ids):
    return [broker.get_task(i).state for i in ids]


def finish(broker, job_id, size=2):
    for _ in range(100):
        job = broker.run_bulk_batch(job_id, size)
        if job.state != BulkJob.RUNNING:
            return job
    raise AssertionError("the job never finished")


def test_cancel_all_matching_cancels_exactly_the_matching_tasks_in_batches(broker):
    hits = [enqueue(broker, queue="b", metadata={"batch": "x"}).id for _ in range(5)]
    others = [enqueue(broker, queue="b", metadata={"batch": "y"}).id, enqueue(broker, queue="c").id]

    job = broker.start_bulk("cancel", {"queue": "b", "where": "metadata.batch = x"}, by="ops")
    assert (job.total, job.state, job.created_by) == (5, BulkJob.RUNNING, "ops")
    first = broker.run_bulk_batch(job.id, 2)
    assert (first.done, first.state) == (2, BulkJob.RUNNING)
    job = finish(broker, job.id)

    assert (job.state, job.done, job.skipped, job.failed, job.percent) == (BulkJob.DONE, 5, 0, 0, 100)
    assert states(broker, hits) == [State.CANCELED] * 5
    assert states(broker, others) == [State.PENDING] * 2


def test_a_task_that_changed_state_in_between_is_skipped_and_counted(broker):
    ids = [enqueue(broker, queue="b", process_in=3600, metadata={"k": "v"}).id for _ in range(4)]
    job = broker.start_bulk("run", {"where": "metadata.k = v"})
    broker.cancel_task(ids[3])  # canceled: run no longer applies

    job = finish(broker, job.id)

    assert (job.total, job.done, job.skipped) == (4, 3, 1)
    assert states(broker, ids) == [State.PENDING] * 3 + [State.CANCELED]


def test_tasks_enqueued_after_the_job_started_are_not_part_of_it(broker, clock):
    old = enqueue(broker, queue="b").id
    job = broker.start_bulk("archive", {"queue": "b"})
    clock.advance(1)
    new = enqueue(broker, queue="b").id

    job = finish(broker, job.id)

    assert (job.done, states(broker, [old, new])) == (1, [State.ARCHIVED, State.PENDING])


def test_a_row_refused_on_its_own_is_counted_failed_and_the_rest_done(broker):
    parent = enqueue(broker, queue="b", process_in=3600)
    enqueue(broker, queue="c", depends_on=[Dependency(parent.id)])
    loose = enqueue(broker, queue="b", process_in=3600)

    job = finish(broker, broker.start_bulk("delete", {"queue": "b"}).id)

    assert (job.done, job.failed) == (1, 1)
    assert broker.get_task(parent.id).state == State.SCHEDULED
    assert not broker.tasks.filter(id=loose.id).exists()


def test_cancel_all_matching_asks_running_tasks_to_stop(broker):
    enqueue(broker, queue="b")
    running = lease_one(broker, "b")

    job = finish(broker, broker.start_bulk("cancel", {"queue": "b"}).id)

    assert job.done == 1 and broker.get_task(running.id).cancel_requested


@pytest.mark.parametrize(
    "action, params, field",
    [("explode", {"queue": "b"}, "action"), ("cancel", {}, "filter"), ("cancel", {"where": "x = 1"}, "where")],
)
def test_a_bad_bulk_request_is_refused_and_records_nothing(broker, action, params, field):
    with pytest.raises(InvalidArgument) as caught:
        broker.start_bulk(action, params)
    assert caught.value.field == field
    assert not BulkJob.objects.using(broker.db).exists()
