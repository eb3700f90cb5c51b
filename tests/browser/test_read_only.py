"""Read-only mode: every control that would change something is disabled, and the server refuses anyway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import DESKTOP, Dash, Node, NodePool, session_state


@pytest.fixture(scope="module")
def ro_node(nodes: NodePool) -> Node:
    """A node started with CONVEYOR_READ_ONLY=1."""
    return nodes.get("read-only")


@pytest.fixture
def ro(browser: Any, ro_node: Node) -> Iterator[Dash]:
    context = browser.new_context(viewport=DESKTOP, storage_state=session_state(ro_node))
    dash = Dash(context.new_page(), ro_node.url)
    yield dash
    context.close()
    assert not dash.unexpected_errors(), dash.unexpected_errors()


def test_read_only_disables_controls_and_the_server_refuses(ro: Dash, ro_node: Node) -> None:
    # Producers may still enqueue in read-only mode; operators may not change anything.
    task = ro_node.enqueue(queue="ro", type="demo", process_in="1h")
    page = ro.page

    ro.goto("/")
    assert page.locator(".banner", has_text="Read-only mode").is_visible()
    assert page.locator(".badge.ro").inner_text() == "read-only"

    ro.goto(f"/tasks/{task['id']}/")
    for name in ("Run now", "Cancel", "Archive", "Delete"):
        assert page.locator(".head-actions").get_by_role("button", name=name, exact=True).is_disabled(), name

    ro.goto("/queues/")
    assert page.locator('tr[data-queue="ro"]').get_by_role("button", name="Pause").is_disabled()
    ro.goto("/queues/ro/")
    assert page.get_by_role("button", name="Save concurrency limit").is_disabled()
    assert page.locator("#limit").is_disabled()

    ro.goto("/tasks/?queue=ro")
    assert page.get_by_label(f"Select {task['id']}").is_disabled()
    assert page.locator(".bulkbar").get_by_role("button", name="Cancel").is_disabled()

    ro.goto("/cron/")
    assert page.locator(".head-actions .is-disabled", has_text="Add entry").is_visible()
    ro.goto("/webhooks/new")
    assert page.get_by_role("button", name="Add registration").is_disabled()

    # The server refuses even when a request gets through (e.g. a stale tab).
    ro.goto("/tasks/?queue=ro")
    token = page.locator('#bulk-form input[name="csrfmiddlewaretoken"]').input_value()
    headers = {"X-CSRFToken": token, "Referer": ro.base + "/tasks/"}
    for path, form in [
        (f"/tasks/{task['id']}/cancel", {}),
        ("/tasks/actions", {"action": "delete", "ids": task["id"]}),
        ("/queues/ro/pause", {}),
        ("/queues/ro/concurrency-limit", {"limit": "2"}),
        ("/cron/new", {"id": "x", "spec": "@daily", "task_type": "demo"}),
        ("/webhooks/new", {"name": "x", "url": "http://127.0.0.1:9/", "queues": "ro"}),
    ]:
        response = page.request.post(
            ro.base + path, form={"csrfmiddlewaretoken": token, **form}, headers=headers, max_redirects=0
        )
        assert response.status == 403, (path, response.status)
        assert "read-only mode" in response.text()
    stored = ro_node.task(task["id"])
    assert stored["state"] == "scheduled"
    queues = {q["name"]: q for q in ro_node.api("GET", "/api/v1/queues")["queues"]}
    assert queues["ro"]["paused"] is False and queues["ro"]["concurrency_limit"] is None
    assert (
        ro_node.api("GET", "/api/v1/cron")["entries"] == [] and ro_node.api("GET", "/api/v1/webhooks")["webhooks"] == []
    )
