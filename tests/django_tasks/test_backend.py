"""ConveyorBackend in this process: how calls are stored, read back, kept and configured.

How the functions run (with a real node and worker, against Django's
ImmediateBackend) is tests/django_tasks/test_parity.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core import checks
from django.db import transaction
from django.tasks import TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTaskBackend, TaskResultDoesNotExist
from django.test import override_settings

from conveyor.broker import Broker, set_broker
from conveyor.clock import FakeClock
from conveyor.django_tasks import ConveyorFailure, conveyor_priority
from conveyor.django_tasks.stored import ERROR_BUDGET, decode_error, encode_error, encode_result
from conveyor.models import Task
from tests.django_tasks.settings import TASKS
from tests.django_tasks.tasks import Boom, add, shout

pytestmark = pytest.mark.django_db(transaction=True)

CONVEYOR = TASKS["default"]


@pytest.fixture
def broker(clock: FakeClock) -> Iterator[Broker]:
    """The process-wide broker, on a clock the test moves."""
    broker = Broker(clock=clock)
    set_broker(broker)
    yield broker
    set_broker(None)


def finish(broker: Broker, task_id: str, value: object, worker: str = "sess-1") -> None:
    """Lease the task and complete it as conveyor_worker does."""
    [leased] = broker.lease("default", 1, "node-1").tasks
    assert leased.id == task_id
    broker.ack(task_id, leased.lease_id, json.dumps(encode_result(value, worker)).encode())


def fail(broker: Broker, task_id: str, worker: str = "sess-1") -> None:
    [leased] = broker.lease("default", 1, "node-1").tasks
    error = TaskError(exception_class_path="tests.django_tasks.tasks.Boom", traceback="Traceback ...\nBoom: x\n")
    broker.fail(task_id, leased.lease_id, broker.now(), encode_error(error, worker))


# -- enqueue ----------------------------------------------------------------------------------


def test_enqueue_stores_a_conveyor_task() -> None:
    result = add.enqueue(2, 3)
    stored = Task.objects.get(id=result.id)
    assert stored.type == "django:tests.django_tasks.tasks.add"
    assert stored.queue == "default" and stored.state == "pending"
    assert json.loads(bytes(stored.payload)) == {"args": [2, 3], "kwargs": {}}
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs, result.worker_ids, result.errors) == ([2, 3], {}, [], [])


def test_priority_and_queue_are_mapped() -> None:
    stored = Task.objects.get(id=shout.enqueue("hi").id)
    assert (stored.queue, stored.priority) == ("urgent", 9)
    assert json.loads(bytes(stored.payload))["priority"] == 100  # Django's own, for reading back


def test_run_after_schedules_the_task() -> None:
    result = add.enqueue(1, 1)
    later = result.enqueued_at + timedelta(hours=1)
    deferred = add.using(run_after=later).enqueue(1, 1)
    stored = Task.objects.get(id=deferred.id)
    assert (stored.state, stored.due_at) == ("scheduled", later)
    assert deferred.status == TaskResultStatus.READY
    assert add.get_result(deferred.id).task.run_after == later


def test_enqueue_rolls_back_with_the_callers_transaction() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        doomed = add.enqueue(1, 1)
        raise RuntimeError("the view failed")
    assert not Task.objects.filter(id=doomed.id).exists()


def test_enqueue_commits_with_the_callers_transaction() -> None:
    with transaction.atomic():
        kept = add.enqueue(1, 1)
        assert Task.objects.filter(id=kept.id).exists()
    assert Task.objects.get(id=kept.id).state == "pending"


# -- priority -----------------------------------------------------------------------------------


def test_the_priority_mapping_is_monotonic_and_only_the_default_maps_to_the_default() -> None:
    mapped = {p: conveyor_priority(p) for p in range(-100, 101)}
    values = list(mapped.values())
    assert values == sorted(values)
    assert set(values) == set(range(1, 10))
    assert (mapped[-100], mapped[0], mapped[100]) == (1, 4, 9)
    assert [p for p, c in mapped.items() if c == 4] == [0]
    assert min(c for p, c in mapped.items() if p > 0) == 5  # any raise runs before the default
    assert max(c for p, c in mapped.items() if p < 0) == 3
    # Equal bands on each side, from whole-number arithmetic (no rounding).
    widths = [values.count(c) for c in range(1, 10)]
    assert widths == [33, 33, 34, 1, 20, 20, 20, 20, 20]


# -- reading back -------------------------------------------------------------------------------


def test_get_result_of_an_unknown_id_raises() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("01NOSUCHTASK")


def test_a_result_is_kept_for_a_day_by_default(broker: Broker, clock: FakeClock) -> None:
    result = add.enqueue(20, 22)
    finish(broker, result.id, 42)

    clock.advance(23 * 3600)
    broker.purge()
    assert add.get_result(result.id).return_value == 42

    clock.advance(2 * 3600)
    broker.purge()
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(result.id)


def test_the_retention_option_sets_how_long(broker: Broker, clock: FakeClock) -> None:
    with override_settings(TASKS={"default": {**CONVEYOR, "OPTIONS": {"RETENTION": 60}}}):
        result = add.enqueue(1, 2)
        finish(broker, result.id, 3)
        clock.advance(61)
        broker.purge()
        with pytest.raises(TaskResultDoesNotExist):
            add.get_result(result.id)


def test_a_retried_task_keeps_the_worker_and_error_of_its_failed_attempt(broker: Broker) -> None:
    with override_settings(TASKS={"default": {**CONVEYOR, "OPTIONS": {"MAX_RETRY": 2}}}):
        result = add.enqueue(1, 2)
        fail(broker, result.id, worker="sess-1")
        result.refresh()
        assert (result.status, result.attempts, result.worker_ids) == (TaskResultStatus.READY, 1, ["sess-1"])
        finish(broker, result.id, 3, worker="sess-2")
        result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.worker_ids == ["sess-1", "sess-2"]
    assert [e.exception_class for e in result.errors] == [Boom]


def test_a_failure_outside_the_function_is_a_conveyor_failure(broker: Broker) -> None:
    result = add.enqueue(1, 2)
    broker.cancel_task(result.id)
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class is ConveyorFailure
    assert error.traceback == Task.objects.get(id=result.id).last_error
    assert result.worker_ids == []


# -- the stored error ---------------------------------------------------------------------------


def test_a_stored_error_reads_back_through_a_prefix_the_server_added() -> None:
    error = TaskError(exception_class_path="pkg.mod.Error", traceback="Traceback (most recent call last):\n...\n")
    text = "canceled while running: " + encode_error(error, "sess-9")

    assert decode_error(text, fallback="archived") == (error, "sess-9")


def test_a_long_traceback_keeps_its_end() -> None:
    traceback = "Traceback (most recent call last):\n" + "  frame\n" * 2000 + "pkg.Error: the end\n"
    text = encode_error(TaskError(exception_class_path="pkg.Error", traceback=traceback), "sess-1")

    assert len(text) <= ERROR_BUDGET
    decoded, _ = decode_error(text, fallback="")
    assert decoded.traceback.startswith("…\n") and decoded.traceback.endswith("pkg.Error: the end\n")


# -- configuration ------------------------------------------------------------------------------


def test_bad_options_are_reported_by_check_and_refused_at_enqueue() -> None:
    options = {"RETENTION": -1, "MAX_RETRY": "3", "RETENTON": 5}
    with override_settings(TASKS={"default": {**CONVEYOR, "OPTIONS": options}}):
        errors = [e for e in checks.run_checks() if e.id == "conveyor.tasks.E001"]
        with pytest.raises(InvalidTaskBackend, match="RETENTION must be a number of seconds"):
            add.enqueue(1, 1)

    messages = sorted(e.msg for e in errors)
    assert len(messages) == 3, messages
    assert "unknown option 'RETENTON'" in messages[2]
    assert "MAX_RETRY must be a whole number >= 0, not '3'" in messages[0]
    assert "RETENTION must be a number of seconds >= 0, not -1" in messages[1]
    assert not Task.objects.exists()
