"""Dashboard wording: counts read as English ("1 task matches"), an earlier attempt's error is not the task's end."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conveyor.broker import TaskSpec, get_broker
from conveyor.broker.types import WebhookSpec
from conveyor.models import Task, WebhookStatus
from tests.admin.conftest import task_page

pytestmark = pytest.mark.django_db(transaction=True)


def tasks_page(client: Client, **params: str) -> str:
    response = client.get(reverse("conveyor:dashboard:tasks"), params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_task_count_and_the_matching_confirmations_pluralize(staff: Client) -> None:
    get_broker().enqueue(TaskSpec(type="t", queue="words"))
    one = tasks_page(staff, queue="words")
    assert ">1 task matches<" in one
    assert 'data-confirm="Cancel all 1 matching task? ' in one
    get_broker().enqueue(TaskSpec(type="t", queue="words"))
    two = tasks_page(staff, queue="words")
    assert ">2 tasks match<" in two
    assert 'data-confirm="Cancel all 2 matching tasks? ' in two


def test_the_webhooks_page_says_one_recent_delivery(staff: Client) -> None:
    get_broker().upsert_webhook(WebhookSpec(name="hook", url="https://example.com/hook", queues={"q": 1}))
    WebhookStatus.objects.create(name="hook", recent=[{"outcome": "success"}], updated_at=timezone.now())
    html = staff.get(reverse("conveyor:dashboard:webhooks")).content.decode()
    assert 'aria-label="1 of 1 recent delivery succeeded"' in html


@pytest.mark.parametrize(
    ("state", "heading"),
    [
        ("completed", 'Last error <span class="muted">(earlier attempt)</span></h2>'),
        ("retry", 'Last error <span class="muted">(earlier attempt)</span></h2>'),
        ("archived", "Last error</h2>"),
        ("canceled", "Last error</h2>"),
    ],
)
def test_the_last_error_of_a_task_that_did_not_end_by_it_says_earlier_attempt(
    staff: Client, state: str, heading: str
) -> None:
    task = get_broker().enqueue(TaskSpec(type="t"))
    # The row as an attempt that failed, then the state it is in now.
    Task.objects.filter(id=task.id).update(state=state, retried=1, last_error="boom: connection reset")
    html = task_page(staff, task.id)
    assert heading in html
    assert ('class="card card-error" aria-labelledby="error-h"' in html) is (state in ("archived", "canceled"))


@pytest.mark.parametrize(("state", "said"), [("completed", False), ("archived", True), ("canceled", True)])
def test_a_tasks_retention_says_when_it_does_not_apply(staff: Client, state: str, said: bool) -> None:
    # A task's retention keeps its completed row; an archived or canceled
    # one is kept by the server-wide retention of failed tasks instead.
    task = get_broker().enqueue(TaskSpec(type="t", retention=3600))
    Task.objects.filter(id=task.id).update(state=state)
    html = task_page(staff, task.id)
    assert "1h after completion" in html
    assert (f"(not completed: kept as {state} tasks are)" in html) is said


@pytest.mark.parametrize(
    ("state", "ended_by_it"), [("completed", False), ("retry", False), ("archived", True), ("canceled", True)]
)
def test_the_task_list_shows_an_earlier_attempts_error_muted_not_red(
    staff: Client, state: str, ended_by_it: bool
) -> None:
    task = get_broker().enqueue(TaskSpec(type="t", queue="errs"))
    Task.objects.filter(id=task.id).update(state=state, retried=1, last_error="boom: connection reset")
    html = tasks_page(staff, queue="errs")
    assert ('<td class="hide-sm err"><span title="boom: connection reset">' in html) is ended_by_it
    assert (
        '<td class="hide-sm muted"><span title="earlier attempt: boom: connection reset">' in html
    ) is not ended_by_it
