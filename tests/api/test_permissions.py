"""A staff session gets what its Django model permissions allow, as in the admin (conveyor.permissions).

The REST API (with tokens on, where sessions are checked at all), the SSE
events, the dashboard and the admin's task actions ask ``view_<model>`` to
see, ``add_task`` to enqueue, ``change_<model>`` to act and
``delete_task`` to delete a task. A staff user with no permissions, whom
the admin refuses, gets nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.test import AsyncClient, Client

from conveyor.broker import TaskSpec
from conveyor.broker.types import CronSpec, WebhookSpec
from conveyor.models import CronEntry, GroupConfig, Queue, Task, WebhookRegistration
from tests.api.conftest import Api, ok, refused, state_of_everything
from tests.api.test_auth import MUTATIONS, PRODUCERS

pytestmark = pytest.mark.django_db(transaction=True)

# The permission each REST mutation of test_auth.MUTATIONS needs.
NEEDS = {
    "/api/v1/tasks/t1/cancel": "change_task",
    "/api/v1/tasks/t1/run": "change_task",
    "/api/v1/tasks/t1/archive": "change_task",
    "/api/v1/tasks/t1/reschedule": "change_task",
    "/api/v1/tasks/t1": "delete_task",
    "/api/v1/tasks/actions/delete": "delete_task",
    "/api/v1/groups": "change_groupconfig",
    "/api/v1/groups?queue=q1": "change_groupconfig",
}
PREFIXES = [("/api/v1/tasks/actions/", "change_task"), ("/api/v1/queues/", "change_queue"),
            ("/api/v1/cron", "change_cronentry"), ("/api/v1/webhooks", "change_webhookregistration")]  # fmt: skip
READS = {
    "/api/v1/tasks": "view_task",
    "/api/v1/tasks/t1": "view_task",
    "/api/v1/info": "view_task",
    "/api/v1/stats/history": "view_task",
    "/api/v1/queues": "view_queue",
    "/api/v1/limits": "view_queue",
    "/api/v1/groups": "view_groupconfig",
    "/api/v1/cron": "view_cronentry",
    "/api/v1/cron/c1": "view_cronentry",
    "/api/v1/webhooks": "view_webhookregistration",
    "/api/v1/webhooks/w1": "view_webhookregistration",
    "/api/v1/workers": "view_workersession",
    "/api/v1/cluster": "view_node",
}
EVERY_VIEW = sorted(set(READS.values()))


@pytest.fixture
def setup(broker: Any) -> None:
    """What test_auth.MUTATIONS act on: task t1, queue q1 and its limits, cron entry c1, webhook w1."""
    broker.enqueue(TaskSpec(type="api:test", id="t1", queue="q1"))
    broker.set_rate_limit("q1", 5, 1)
    broker.set_concurrency_limit("q1", 2)
    broker.set_group_config("q1", "", max_size=5)
    broker.upsert_cron_entry(CronSpec(id="c1", spec="@daily", task_type="t"))
    broker.upsert_webhook(WebhookSpec(name="w1", url="https://w.example.com/", queues={"q": 1}))


def needs(path: str) -> str:
    if path in NEEDS:
        return NEEDS[path]
    return next(perm for prefix, perm in PREFIXES if path.startswith(prefix))


def staff_with(*codenames: str, name: str = "op") -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="conveyor", codename__in=codenames))
    return user


def session(user: User) -> Api:
    api = Api()
    api.client.force_login(user)
    return api


# -- REST -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), MUTATIONS, ids=[f"{m} {p}" for m, p, _ in MUTATIONS])
def test_a_rest_change_needs_its_change_permission(tokens, setup, method, path, body):
    perm = needs(path)
    viewer = session(staff_with(*EVERY_VIEW, name="viewer"))
    before = state_of_everything()

    denied = refused(viewer.call(method, path, body), 403, "permission_denied")

    assert f"conveyor.{perm}" in denied["message"] and "viewer" in denied["message"]
    assert state_of_everything() == before
    allowed = session(staff_with(*EVERY_VIEW, perm, name="operator")).call(method, path, body)
    assert allowed.status_code < 400, allowed.content[:300]


@pytest.mark.parametrize(("path", "perm"), READS.items(), ids=list(READS))
def test_a_rest_read_needs_its_view_permission(tokens, setup, path, perm):
    others = [p for p in EVERY_VIEW if p != perm]

    denied = refused(session(staff_with(*others, name="others")).get(path), 403, "permission_denied")

    assert f"conveyor.{perm}" in denied["message"]
    ok(session(staff_with(perm, name="reader")).get(path))


@pytest.mark.parametrize(("path", "body", "status"), PRODUCERS, ids=[p for p, _, _ in PRODUCERS])
def test_a_session_enqueue_needs_add_task(tokens, setup, path, body, status):
    refused(session(staff_with(*EVERY_VIEW, "change_task", name="viewer")).post(path, body), 403, "permission_denied")
    assert Task.objects.count() == 1
    ok(session(staff_with("add_task", name="producer")).post(path, body), status)


def test_a_staff_user_with_no_permissions_gets_nothing_and_a_superuser_everything(tokens, setup):
    bare = session(staff_with(name="bare"))
    for path in READS:
        refused(bare.get(path), 403, "permission_denied")
    root = Api()
    root.client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    for path in READS:
        ok(root.get(path))
    ok(root.post("/api/v1/queues/q1/pause"))


def test_tokens_are_not_asked_for_model_permissions(tokens, setup):
    ok(Api("api-test-token").post("/api/v1/queues/q1/pause"))


def test_the_sse_event_stream_needs_view_task(tokens, setup):
    async def status(user: User) -> int:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get("/api/v1/events")
        return response.status_code

    assert async_to_sync(status)(staff_with(*[p for p in EVERY_VIEW if p != "view_task"], name="no-tasks")) == 401
    assert async_to_sync(status)(staff_with("view_task", name="watcher")) == 200


# -- the dashboard --------------------------------------------------------------------------------

PAGES = {"/": "view_task", "/tasks/": "view_task", "/tasks/t1/": "view_task", "/events/": "view_task",
         "/queues/": "view_queue", "/queues/q1/": "view_queue", "/workers/": "view_workersession",
         "/cron/": "view_cronentry", "/cron/new": "view_cronentry", "/webhooks/": "view_webhookregistration",
         "/webhooks/new": "view_webhookregistration"}  # fmt: skip


def browser(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_limits_page_needs_view_queue(setup):
    refused_page = browser(staff_with(name="bare")).get("/limits/")
    assert refused_page.status_code == 403 and "conveyor.view_queue" in refused_page.content.decode()
    assert browser(staff_with("view_queue", name="viewer")).get("/limits/").status_code == 200


@pytest.mark.parametrize(("path", "perm"), PAGES.items(), ids=list(PAGES))
def test_a_dashboard_page_needs_its_view_permission(setup, path, perm):
    refused_page = browser(staff_with(name="bare")).get(path)
    assert refused_page.status_code == 403 and f"conveyor.{perm}" in refused_page.content.decode()

    seen = browser(staff_with(perm, name="viewer")).get(path)
    assert seen.status_code == 200
    # Seen, not changeable: the controls are disabled and a banner says why.
    assert "View only: your account lacks the conveyor.change_" in seen.content.decode()


DASHBOARD_ACTS = [
    ("/queues/q1/pause", {}, "change_queue", lambda: Queue.objects.get(name="q1").paused),
    ("/tasks/t1/cancel", {}, "change_task", lambda: Task.objects.get(id="t1").state == "canceled"),
    ("/tasks/t1/delete", {}, "delete_task", lambda: not Task.objects.filter(id="t1").exists()),
    ("/tasks/actions", {"action": "delete", "ids": ["t1"]}, "delete_task", lambda: not Task.objects.exists()),
    ("/tasks/actions", {"action": "archive", "ids": ["t1"]}, "change_task",
     lambda: Task.objects.get(id="t1").state == "archived"),
    ("/queues/q1/group-config", {"op": "remove", "group": ""}, "change_groupconfig",
     lambda: not GroupConfig.objects.exists()),
    ("/cron/c1/pause", {}, "change_cronentry", lambda: CronEntry.objects.get(id="c1").paused),
    ("/cron/new", {"id": "c9", "spec": "@daily", "task_type": "t", "queue": "default"}, "change_cronentry",
     lambda: CronEntry.objects.filter(id="c9").exists()),
    ("/webhooks/w1/pause", {}, "change_webhookregistration", lambda: WebhookRegistration.objects.get(name="w1").paused),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "form", "perm", "done"), DASHBOARD_ACTS, ids=[f"{a[0]} {a[2]}" for a in DASHBOARD_ACTS]
)
def test_a_dashboard_action_needs_its_permission(setup, path, form, perm, done):
    viewer = browser(staff_with(*EVERY_VIEW, *{"change_task"} - {perm}, name="viewer"))
    before = state_of_everything()

    response = viewer.post(path, form)

    assert response.status_code == 403 and f"conveyor.{perm}" in response.content.decode()
    assert state_of_everything() == before and not done()
    acted = browser(staff_with(*EVERY_VIEW, perm, name="operator")).post(path, form)
    assert acted.status_code == 302, acted.content.decode()[:500]
    assert done()


# -- the admin's task actions ---------------------------------------------------------------------


def admin_action(user: User, action: str) -> Any:
    return browser(user).post("/admin/conveyor/task/", {"action": action, "_selected_action": ["t1"]})


def test_the_admins_task_actions_need_change_or_delete_task(setup):
    viewer = staff_with("view_task", name="viewer")
    listing = browser(viewer).get("/admin/conveyor/task/").content.decode()
    assert "cancel_selected" not in listing and "delete_selected" not in listing

    admin_action(viewer, "cancel_selected")
    assert Task.objects.get(id="t1").state == "pending"

    changer = staff_with("view_task", "change_task", name="changer")
    assert "delete_selected" not in browser(changer).get("/admin/conveyor/task/").content.decode()
    admin_action(changer, "archive_selected")
    assert Task.objects.get(id="t1").state == "archived"
    admin_action(changer, "delete_selected")
    assert Task.objects.filter(id="t1").exists()

    admin_action(staff_with("view_task", "delete_task", name="deleter"), "delete_selected")
    assert not Task.objects.filter(id="t1").exists()
