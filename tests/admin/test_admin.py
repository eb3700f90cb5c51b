"""The Django admin lists tasks read-only and acts on them through the broker."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from conveyor.broker import TaskSpec, get_broker
from conveyor.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff() -> Client:
    User.objects.create_superuser("admin", "a@example.com", "pw")
    client = Client()
    client.login(username="admin", password="pw")
    return client


def test_task_list_filters_by_queue_and_state(staff: Client) -> None:
    broker = get_broker()
    broker.enqueue(TaskSpec(type="email:send", queue="mail"))
    other = broker.enqueue(TaskSpec(type="report:build", queue="reports"))
    response = staff.get("/admin/conveyor/task/", {"queue": "reports", "state": "pending"})
    assert response.status_code == 200
    assert other.id in response.content.decode()
    assert "email:send" not in response.content.decode().split("result_list")[1]


def test_task_search_finds_by_id_and_type(staff: Client) -> None:
    task = get_broker().enqueue(TaskSpec(type="needle:type"))
    assert task.id in staff.get("/admin/conveyor/task/", {"q": task.id}).content.decode()
    assert task.id in staff.get("/admin/conveyor/task/", {"q": "needle:type"}).content.decode()


def test_task_detail_is_read_only(staff: Client) -> None:
    task = get_broker().enqueue(TaskSpec(type="t"))
    page = staff.get(f"/admin/conveyor/task/{task.id}/change/")
    assert page.status_code == 200
    assert 'name="state"' not in page.content.decode()  # no editable state field
    response = staff.post(f"/admin/conveyor/task/{task.id}/change/", {"state": "completed"})
    assert response.status_code == 403
    assert Task.objects.get(id=task.id).state == "pending"


def test_admin_action_goes_through_the_broker(staff: Client) -> None:
    waiting = get_broker().enqueue(TaskSpec(type="t"))
    response = staff.post(
        "/admin/conveyor/task/", {"action": "cancel_selected", "_selected_action": [waiting.id]}, follow=True
    )
    assert response.status_code == 200
    task = Task.objects.get(id=waiting.id)
    assert task.state == "canceled" and task.last_error == "canceled by operator"


def test_admin_action_reports_refusals(staff: Client) -> None:
    task = get_broker().enqueue(TaskSpec(type="t"))
    get_broker().cancel_task(task.id)
    response = staff.post(
        "/admin/conveyor/task/", {"action": "cancel_selected", "_selected_action": [task.id]}, follow=True
    )
    assert "cannot cancel task" in response.content.decode()
    assert Task.objects.get(id=task.id).state == "canceled"


def test_webhook_secrets_are_not_shown(staff: Client) -> None:
    from conveyor.broker.types import WebhookSpec

    get_broker().upsert_webhook(
        WebhookSpec(name="hooks", url="https://example.com/x", queues={"default": 1}, secrets=["very-secret"])
    )
    page = staff.get("/admin/conveyor/webhookregistration/hooks/change/")
    assert page.status_code == 200
    assert "very-secret" not in page.content.decode()
