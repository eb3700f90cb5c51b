"""django.tasks on Conveyor behaves as Django's ImmediateBackend on the same task functions.

Each test runs once on ``django.tasks.backends.immediate.ImmediateBackend``
(in this process) and once on ``ConveyorBackend`` with a real dev node and a
real ``manage.py conveyor_worker`` (one pair for the module). What they are
allowed to differ in is listed in docs/django.md, "Differences".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask
from django.test import override_settings

from conveyor.models import Task as TaskRow
from tests.django_tasks import signal_log
from tests.django_tasks.settings import TASKS
from tests.django_tasks.support import Runner, Stack, start_stack
from tests.django_tasks.tasks import (
    Boom,
    add,
    add_later,
    explode,
    halfway_then_wait,
    label,
    nested,
    opaque,
    shout,
    which_attempt,
)
from tests.e2e.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

IMMEDIATE = {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": TASKS["default"]["QUEUES"]}


@pytest.fixture(scope="module")
def stack(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One node and one conveyor_worker over the test database, for the whole module."""
    running = start_stack(tmp_path_factory.mktemp("django-tasks") / "signals.jsonl")
    yield running
    running.stop()


@pytest.fixture(params=["immediate", pytest.param("conveyor", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Runner]:
    if request.param == "immediate":
        log = tmp_path / "signals.jsonl"
        monkeypatch.setenv(signal_log.ENV, str(log))
        with override_settings(TASKS={"default": IMMEDIATE}):
            yield Runner("immediate", log)
        return
    stack: Stack = request.getfixturevalue("stack")
    monkeypatch.setenv(signal_log.ENV, str(stack.signal_log))
    yield Runner("conveyor", stack.signal_log, stack)


# -- results ----------------------------------------------------------------------------------


def test_a_successful_tasks_return_value_is_read_back(backend: Runner) -> None:
    result = backend.run(add, 20, 22)

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert (result.args, result.kwargs, result.errors) == ([20, 22], {}, [])
    assert result.enqueued_at <= result.started_at <= result.finished_at
    if backend.stack is not None:  # and from anywhere, later: Conveyor stores it
        again = add.get_result(result.id)
        assert (again.status, again.return_value, again.finished_at) == (
            TaskResultStatus.SUCCESSFUL,
            42,
            result.finished_at,
        )


def test_return_values_are_json_normalised(backend: Runner) -> None:
    result = backend.run(nested)

    assert result.return_value == {"pair": [1, 2], "raw": "bytes", "items": [["a", 1]]}


def test_a_return_value_that_is_not_json_fails_the_task(backend: Runner) -> None:
    result = backend.run(opaque)

    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class is TypeError
    assert error.exception_class_path == "builtins.TypeError"
    assert "Unsupported type" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_an_async_function_runs(backend: Runner) -> None:
    assert backend.run(add_later, 2, 3).return_value == 5


def test_arguments_that_are_not_json_are_refused_at_enqueue(backend: Runner) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        add.enqueue(object(), 1)


# -- errors -----------------------------------------------------------------------------------


def test_errors_carry_the_exception_class_path_and_the_traceback(backend: Runner) -> None:
    result = backend.run(explode)

    assert result.status == TaskResultStatus.FAILED
    assert result.finished_at is not None
    [error] = result.errors
    assert error.exception_class_path == "tests.django_tasks.tasks.Boom"
    assert error.exception_class is Boom
    assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert 'django_tasks/tasks.py", line ' in error.traceback
    assert '    raise Boom("bad input")\n' in error.traceback
    assert error.traceback.endswith("tests.django_tasks.tasks.Boom: bad input\n")


# -- attempts, workers, context ----------------------------------------------------------------


def test_worker_ids_name_the_worker_of_each_attempt(backend: Runner) -> None:
    result = backend.run(add, 1, 1)

    assert result.attempts == 1
    if backend.stack is not None:
        assert result.worker_ids[0] in backend.stack.session_ids  # the session the dashboard lists
    else:
        assert result.worker_ids == [task_backends["default"].worker_id]


def test_a_task_taking_context_sees_its_attempt(backend: Runner) -> None:
    assert backend.run(which_attempt, "x").return_value == {"label": "x", "attempt": 1}


def test_a_task_taking_context_can_report_progress(backend: Runner, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    if backend.stack is None:
        gate.touch()  # ImmediateBackend runs it inside enqueue: nothing to wait for
        result = backend.run(halfway_then_wait, str(gate))
        assert result.return_value is False  # nowhere to report to: a no-op, not an error
        return
    result = halfway_then_wait.enqueue(str(gate))
    row = wait_for(lambda: TaskRow.objects.filter(id=result.id, progress=50).first(), 30, what="progress 50")
    assert row.progress_message == "halfway"
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    gate.touch()
    backend.wait(result)

    assert result.return_value is True


def test_the_priority_and_queue_of_the_call_are_kept(backend: Runner) -> None:
    result = backend.run(shout.using(priority=-7), "hi")

    assert result.return_value == "HI"
    assert (result.task.priority, result.task.queue_name) == (-7, "urgent")
    if backend.stack is not None:
        assert shout.get_result(result.id).task.priority == -7


# -- signals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("function", "status"), [(add, "SUCCESSFUL"), (explode, "FAILED")])
def test_signals_are_sent_where_django_sends_them(backend: Runner, function, status: str) -> None:  # type: ignore[no-untyped-def]
    args = (1, 2) if function is add else ()
    result = backend.run(function, *args)
    seen = wait_for(lambda: (lines := signal_log.read(backend.signal_log, result.id))[2:] and lines, 10, what="signals")

    sender = type(task_backends["default"])
    assert [s["signal"] for s in seen] == ["enqueued", "started", "finished"]
    assert {s["sender"] for s in seen} == {f"{sender.__module__}.{sender.__qualname__}"}
    enqueued, started, finished = seen
    assert (enqueued["status"], started["status"], finished["status"]) == ("READY", "RUNNING", status)
    assert enqueued["pid"] == os.getpid()  # where enqueue is called
    runs_here = backend.stack is None
    assert (started["pid"] == os.getpid(), finished["pid"] == os.getpid()) == (runs_here, runs_here)
    assert started["worker_ids"] == finished["worker_ids"] == result.worker_ids
    # A failure's signal is sent from inside the except, so receivers can log the exception.
    assert finished["in_except"] is (status == "FAILED")
    assert finished["errors"] == ([] if status == "SUCCESSFUL" else ["tests.django_tasks.tasks.Boom"])


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "backend_path", ["django.tasks.backends.immediate.ImmediateBackend", "conveyor.django_tasks.ConveyorBackend"]
)
def test_queues_are_validated_by_default(backend_path: str) -> None:
    with override_settings(TASKS={"default": {"BACKEND": backend_path}}):
        with pytest.raises(InvalidTask, match="Queue 'elsewhere' is not valid for backend"):
            add.using(queue_name="elsewhere")
        assert add.using(queue_name="default").queue_name == "default"


# -- what only Conveyor does -------------------------------------------------------------------


@pytest.mark.slow
def test_higher_django_priorities_run_first(stack: Stack) -> None:
    """ImmediateBackend runs each task inside enqueue; Conveyor orders waiting tasks by priority."""
    stack.node.api("POST", "/api/v1/queues/ordered/pause")
    try:
        order = [-100, -1, 0, 1, 100, 50]  # enqueued in this order, one slot serves the queue
        results = {p: label.using(priority=p).enqueue(str(p)) for p in order}
    finally:
        stack.node.api("POST", "/api/v1/queues/ordered/resume")
    runner = Runner("conveyor", stack.signal_log, stack)
    for result in results.values():
        runner.wait(result)

    ids = {r.id: p for p, r in results.items()}
    started = [line["id"] for line in signal_log.read_all(stack.signal_log) if line["signal"] == "started"]
    assert [ids[i] for i in started if i in ids] == [100, 50, 1, 0, -1, -100]
