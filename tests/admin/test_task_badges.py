"""The task page's "cancel requested" badge: shown while the worker is asked to stop, not once the task ended."""

from __future__ import annotations

import pytest
from django.test import Client

from conveyor.broker import TaskSpec, get_broker
from conveyor.models import Task
from tests.admin.conftest import task_page

pytestmark = pytest.mark.django_db(transaction=True)

BADGE = ">cancel requested</span>"


@pytest.mark.parametrize(("state", "shown"), [("active", True), ("archived", False), ("canceled", False)])
def test_the_cancel_requested_badge_shows_only_while_the_task_runs(staff: Client, state: str, shown: bool) -> None:
    task = get_broker().enqueue(TaskSpec(type="t"))
    # The row as a cancel of a running task leaves it, then as the run ended.
    Task.objects.filter(id=task.id).update(state=state, cancel_requested=True)
    assert (BADGE in task_page(staff, task.id)) is shown
