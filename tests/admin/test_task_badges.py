"""The task page's "cancel requested" badge: shown while the worker is asked to stop, not once the task ended."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from conveyor.broker import TaskSpec, get_broker
from conveyor.models import Task

pytestmark = pytest.mark.django_db(transaction=True)

BADGE = ">cancel requested</span>"


@pytest.fixture
def staff() -> Client:
    User.objects.create_superuser("admin", "a@example.com", "pw")
    client = Client()
    client.login(username="admin", password="pw")
    return client


def page(client: Client, task_id: str) -> str:
    response = client.get(reverse("conveyor:dashboard:task", args=[task_id]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(("state", "shown"), [("active", True), ("archived", False), ("canceled", False)])
def test_the_cancel_requested_badge_shows_only_while_the_task_runs(staff: Client, state: str, shown: bool) -> None:
    task = get_broker().enqueue(TaskSpec(type="t"))
    # The row as a cancel of a running task leaves it, then as the run ended.
    Task.objects.filter(id=task.id).update(state=state, cancel_requested=True)
    assert (BADGE in page(staff, task.id)) is shown
