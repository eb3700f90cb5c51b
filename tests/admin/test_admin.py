"""The Django admin lists tasks read-only and acts on them through the broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from conveyor.broker import TaskSpec, get_broker
from conveyor.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


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


# -- read-only mode: the admin's user management too ---------------------------------------


@pytest.fixture
def read_only_mode() -> Iterator[None]:
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        yield


def test_read_only_mode_refuses_creating_a_user_in_the_admin(staff: Client, read_only_mode: None) -> None:
    form = staff.get("/admin/auth/user/add/")
    created = staff.post(
        "/admin/auth/user/add/", {"username": "intruder", "password1": "x9!long-pass", "password2": "x9!long-pass"}
    )

    assert (form.status_code, created.status_code) == (403, 403)
    assert not User.objects.filter(username="intruder").exists()


def test_read_only_mode_refuses_changing_a_users_permissions_or_password(staff: Client, read_only_mode: None) -> None:
    user = User.objects.create_user("ops", password="old-password-1")

    changed = staff.post(f"/admin/auth/user/{user.pk}/change/", {"username": "ops", "is_staff": "on",
                                                                 "is_superuser": "on", "is_active": "on"})  # fmt: skip
    password = staff.post(
        f"/admin/auth/user/{user.pk}/password/", {"password1": "new-pass-99!", "password2": "new-pass-99!"}
    )
    deleted = staff.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})

    assert changed.status_code == 403 and password.status_code == 403 and deleted.status_code == 403
    user.refresh_from_db()
    assert not user.is_superuser and not user.is_staff and user.check_password("old-password-1")


def test_read_only_mode_refuses_creating_a_group_and_still_shows_users(staff: Client, read_only_mode: None) -> None:
    created = staff.post("/admin/auth/group/add/", {"name": "admins"})
    listing = staff.get("/admin/auth/user/")

    assert created.status_code == 403 and not Group.objects.exists()
    assert listing.status_code == 200 and "admin" in listing.content.decode()


def test_without_read_only_mode_the_admin_creates_users(staff: Client) -> None:
    created = staff.post(
        "/admin/auth/user/add/", {"username": "newbie", "password1": "x9!long-pass", "password2": "x9!long-pass"}
    )

    assert created.status_code == 302, created.content.decode()[:500]
    assert User.objects.filter(username="newbie").exists()
