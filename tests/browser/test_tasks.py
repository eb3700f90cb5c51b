"""Tasks: the detail page and its actions, bulk actions, paging, the keyboard."""

from __future__ import annotations

import base64

from tests.browser.conftest import Dash


def test_cancel_a_task_from_its_detail_page(dash: Dash, node, q: str) -> None:
    task = node.enqueue(queue=q, type="invoice.charge", process_in="1h", json={"invoice": 42})
    dash.goto(f"/tasks/{task['id']}/")
    assert dash.page.locator("#task-state").inner_text() == "scheduled"
    cancel = dash.page.locator(".head-actions").get_by_role("button", name="Cancel", exact=True)

    # Backing out of the confirmation changes nothing.
    cancel.click()
    dialog = dash.page.locator("#confirm-dialog")
    assert dialog.is_visible()
    dialog.get_by_role("button", name="Go back", exact=True).click()
    assert dialog.is_hidden()
    assert node.task(task["id"])["state"] == "scheduled"

    cancel.click()
    dialog.get_by_role("button", name="Cancel task").click()
    dash.page.locator(".msg-success", has_text=f"Task {task['id']} canceled.").wait_for()
    assert dash.page.locator("#task-state").inner_text() == "canceled"
    assert node.task(task["id"])["state"] == "canceled"
    # What no longer applies is disabled; a second cancel cannot be asked for.
    assert cancel.is_disabled()
    assert dash.page.locator(".head-actions").get_by_role("button", name="Delete").is_enabled()


def test_a_failed_action_shows_the_reason(dash: Dash, node, q: str) -> None:
    task = node.enqueue(queue=q, type="demo", process_in="1h")
    dash.goto(f"/tasks/{task['id']}/")
    # Another operator deletes it meanwhile: the page says so, live.
    node.api("POST", "/api/v1/tasks/actions/delete", json={"ids": [task["id"]]})
    dash.page.locator(".msg-warning", has_text="no longer exists").wait_for()
    # Acting on the stale page fails with the broker's reason, not a crash.
    dash.page.locator(".head-actions").get_by_role("button", name="Archive").click()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Archive").click()
    error = dash.page.locator(".msg-error")
    error.wait_for()
    assert f"Could not archive task {task['id']}: task {task['id']} not found" in error.inner_text()


def test_reschedule_and_run_now(dash: Dash, node, q: str) -> None:
    task = node.enqueue(queue=q, type="demo", process_in="1h")
    dash.goto(f"/tasks/{task['id']}/")
    dash.page.locator("summary", has_text="Reschedule").click()
    dash.page.fill("#r-in", "2h")
    dash.page.locator(".popover-body").get_by_role("button", name="Reschedule").click()
    dash.page.locator(".msg-success", has_text="rescheduled (scheduled)").wait_for()
    assert node.task(task["id"])["due_at"] > task["due_at"]
    dash.page.get_by_role("button", name="Run now").click()
    dash.page.locator(".msg-success", has_text="is due now").wait_for()
    assert node.task(task["id"])["state"] == "pending"


def test_detail_shows_payload_metadata_dependencies(dash: Dash, node, q: str) -> None:
    parent = node.enqueue(
        queue=q, type="report.build", process_in="1h", json={"day": "2026-11-29", "sections": ["sales", "ops"]},
        metadata={"tenant": "acme"}, unique_key=f"report:{q}",
    )  # fmt: skip
    child = node.enqueue(
        queue=q, type="email.send", json={"to": "ops@example.com"},
        depends_on=[{"task_id": parent["id"], "on_failure": "cascade_cancel"}],
    )  # fmt: skip
    blob = node.enqueue(
        queue=q,
        type="blob.store",
        payload=base64.b64encode(bytes(range(40))).decode(),
        content_type="application/octet-stream",
    )
    dash.goto(f"/tasks/{child['id']}/")
    assert dash.page.locator("#task-state").inner_text() == "blocked"
    upstream = dash.page.locator("#upstream")
    assert "cascade_cancel" in upstream.inner_text()
    upstream.get_by_role("link", name=parent["id"]).click()

    dash.page.wait_for_url(f"**/tasks/{parent['id']}/")
    dash.page.wait_for_selector('#live-status[data-state="live"]')
    payload = dash.page.locator("#payload-h").locator("..").locator("pre")
    assert '"sections": [' in payload.inner_text() and '"sales"' in payload.inner_text()
    assert dash.page.locator("pre.json .k").first.inner_text() == '"day"'
    assert "acme" in dash.page.locator("#meta-h").locator("..").inner_text()
    assert f"report:{q}" in dash.page.locator("#summary-h").locator("..").inner_text()
    assert dash.page.locator("#downstream").get_by_role("link", name=child["id"]).is_visible()
    assert "Attempt" in dash.page.locator("dl.kv").first.inner_text()

    dash.goto(f"/tasks/{blob['id']}/")
    hexdump = dash.page.locator("pre.hex").inner_text()
    assert "Binary, 40 B" in dash.page.locator("#payload-h").locator("..").inner_text()
    assert hexdump.startswith("00000000  00 01 02 03") and "00000020  20 21 22" in hexdump


def test_running_task_shows_progress_and_lease_holder(dash: Dash, node, q: str) -> None:
    from tests.browser.conftest import DemoWorker

    worker = DemoWorker(node, queues={q: 1}, types="demo", concurrency=2)
    try:
        task = node.enqueue(queue=q, type="demo", json={"progress": 40, "message": "resizing images"})
        dash.goto(f"/tasks/{task['id']}/")
        dash.page.locator("#task-state", has_text="active").wait_for()
        dash.page.locator(".progress-text", has_text="40% resizing images").wait_for()
        assert dash.page.locator('[role="progressbar"]').get_attribute("aria-valuenow") == "40"
        holder = node.task(task["id"])["lease_holder"]
        assert holder and dash.page.get_by_role("link", name=holder).is_visible()

        # Cancel while running: the worker is asked to stop, the attempt ends archived.
        dash.page.locator(".head-actions").get_by_role("button", name="Cancel", exact=True).click()
        dash.page.locator("#confirm-dialog").get_by_role("button", name="Cancel task").click()
        dash.page.locator(".msg-success", has_text="Cancel requested").wait_for()
        dash.page.locator("#task-state", has_text="archived").wait_for()
        # A finished task has no lease holder (its attempts keep who ran it).
        dash.page.reload()
        dash.page.locator("#summary-h").wait_for()
        assert dash.page.locator("dt", has_text="Lease holder").count() == 0
    finally:
        worker.stop()


def test_bulk_actions_on_selected_tasks(dash: Dash, node, q: str) -> None:
    ids = [node.enqueue(queue=q, type="demo", process_in="1h")["id"] for _ in range(4)]
    dash.goto(f"/tasks/?queue={q}")
    count = dash.page.locator("#selected-count")
    assert count.inner_text() == "0 selected"
    dash.page.get_by_label("Select all tasks on this page").check()
    assert count.inner_text() == "4 selected"
    dash.page.get_by_label(f"Select {ids[0]}").uncheck()
    assert count.inner_text() == "3 selected"

    dash.page.locator(".bulkbar").get_by_role("button", name="Cancel").click()
    dialog = dash.page.locator("#confirm-dialog")
    assert "Cancel 3 selected tasks?" in dialog.inner_text()
    dialog.get_by_role("button", name="Cancel tasks").click()
    dash.page.locator(".msg-success", has_text="3 tasks canceled.").wait_for()
    states = {i: node.task(i)["state"] for i in ids}
    assert states == {ids[0]: "scheduled", ids[1]: "canceled", ids[2]: "canceled", ids[3]: "canceled"}

    # Mixed outcomes are reported per task: running "Run now" on canceled tasks fails.
    dash.page.get_by_label("Select all tasks on this page").check()
    dash.page.locator(".bulkbar").get_by_role("button", name="Run now").click()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Run now").click()
    dash.page.locator(".msg-success", has_text="1 task made due now.").wait_for()
    assert "Could not run 3 tasks: cannot run task" in dash.page.locator(".msg-error").inner_text()

    dash.page.get_by_label("Select all tasks on this page").uncheck()
    dash.page.get_by_label(f"Select {ids[0]}").check()
    dash.page.locator(".bulkbar").get_by_role("button", name="Delete").click()
    assert "Delete 1 selected task?" in dialog.inner_text()
    dialog.get_by_role("button", name="Go back").click()

    dash.page.get_by_label("Select all tasks on this page").check()
    dash.page.locator(".bulkbar").get_by_role("button", name="Delete").click()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    dash.page.locator(".msg-success", has_text="4 tasks deleted.").wait_for()
    assert dash.page.locator("#task-table").get_by_text("No tasks match these filters.").is_visible()


def test_filters_search_and_cursor_paging(dash: Dash, node, q: str) -> None:
    ids = [node.enqueue(queue=q, type="demo", process_in="1h", unique_key=f"{q}-k{i}")["id"] for i in range(30)]
    dash.goto(f"/tasks/?queue={q}&limit=25")
    rows = dash.page.locator("#task-table tr[data-task-id]")
    assert rows.count() == 25
    assert rows.first.get_attribute("data-task-id") == ids[-1], "newest first"
    with dash.page.expect_navigation():
        dash.page.get_by_role("link", name="Older ›").click()
    assert [rows.nth(i).get_attribute("data-task-id") for i in range(rows.count())] == list(reversed(ids[:5]))
    with dash.page.expect_navigation():
        dash.page.get_by_role("link", name="‹ Newer").click()
    assert rows.count() == 25 and rows.first.get_attribute("data-task-id") == ids[-1]

    dash.page.fill("#f-q", f"{q}-k7")
    with dash.page.expect_navigation():
        dash.page.get_by_role("button", name="Filter").click()
    assert [rows.nth(i).get_attribute("data-task-id") for i in range(rows.count())] == [ids[7]]


def test_keyboard_alone_can_cancel_a_task(dash: Dash, node, q: str) -> None:
    task = node.enqueue(queue=q, type="demo", process_in="1h")
    dash.goto(f"/tasks/{task['id']}/")
    page = dash.page
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Cancel":
            break
    else:
        raise AssertionError("Tab never reached the Cancel button")
    page.keyboard.press("Enter")
    dialog = page.locator("#confirm-dialog")
    assert dialog.is_visible()
    assert page.evaluate("document.activeElement.textContent") == "Go back", "the dialog focuses its safe choice"
    page.keyboard.press("Escape")
    assert dialog.is_hidden() and node.task(task["id"])["state"] == "scheduled"
    page.keyboard.press("Enter")  # focus went back to the Cancel button
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Cancel task"
    page.keyboard.press("Enter")
    page.locator(".msg-success", has_text="canceled").wait_for()
    assert node.task(task["id"])["state"] == "canceled"


def test_missing_task_page(dash: Dash) -> None:
    dash.allow_console_error("404")
    response = dash.goto("/tasks/no-such-task/")
    assert response.status == 404
    assert dash.page.locator("h1").inner_text() == "Task not found"
