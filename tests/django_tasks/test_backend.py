"""django.tasks on Conveyor: enqueue in the caller's transaction, run with conveyor_worker."""

from __future__ import annotations

import sys

import pytest
from django.conf import settings
from django.db import transaction
from django.tasks import TaskResultStatus
from django.tasks.exceptions import TaskResultDoesNotExist

from conveyor.models import Task
from tests.django_tasks.tasks import add, explode, shout, which_attempt
from tests.e2e.support import ROOT, NodeProcess, Process, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_stores_a_conveyor_task() -> None:
    result = add.enqueue(2, 3)
    stored = Task.objects.get(id=result.id)
    assert stored.type == "django:tests.django_tasks.tasks.add"
    assert stored.queue == "default" and stored.state == "pending"
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([2, 3], {})


def test_priority_and_queue_are_mapped() -> None:
    stored = Task.objects.get(id=shout.enqueue("hi").id)
    assert (stored.queue, stored.priority) == ("urgent", 9)


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


def test_get_result_of_an_unknown_id_raises() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("01NOSUCHTASK")


@pytest.mark.slow
def test_conveyor_worker_runs_django_tasks_and_results_come_back(tmp_path) -> None:
    db = settings.DATABASES["default"]["NAME"]  # the test database, already migrated
    ok, context, failing = add.enqueue(20, 22), which_attempt.enqueue("x"), explode.enqueue()
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
    }
    node = NodeProcess(env, dev=True)
    worker = Process(
        [sys.executable, "manage.py", "conveyor_worker", "--url", node.url, "--concurrency", "2"],
        env,
        "conveyor_worker",
    )
    try:
        for result in (ok, context, failing):
            wait_for(lambda r=result: (r.refresh(), r.is_finished)[1], 30, what=f"{result.id} to finish")
        assert ok.status == TaskResultStatus.SUCCESSFUL and ok.return_value == 42
        assert context.return_value == {"label": "x", "attempt": 1}
        assert failing.status == TaskResultStatus.FAILED
        assert "RuntimeError: boom" in failing.errors[0].traceback
    finally:
        worker.stop()
        node.stop()
