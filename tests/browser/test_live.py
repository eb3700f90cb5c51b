"""Pages follow the events WebSocket without a reload."""

from __future__ import annotations

from tests.browser.conftest import Dash


def mark_page(dash: Dash) -> None:
    """Set a marker that only survives while the page is not reloaded."""
    dash.page.evaluate("window.__noReload = true")


def still_same_page(dash: Dash) -> bool:
    return bool(dash.page.evaluate("window.__noReload === true"))


def test_task_enqueued_through_the_api_appears_without_reload(dash: Dash, node, q: str) -> None:
    dash.goto(f"/tasks/?queue={q}")
    assert dash.page.locator("#task-table").get_by_text("No tasks match these filters.").is_visible()
    mark_page(dash)
    task = node.enqueue(queue=q, type="report.build", process_in="1h", json={"day": "2026-11-29"})
    row = dash.page.locator(f'tr[data-task-id="{task["id"]}"]')
    row.wait_for()
    assert row.locator(".badge").inner_text() == "scheduled"
    assert "report.build" in row.inner_text()
    assert still_same_page(dash)

    # A state change shows up too: run it now from the API, the badge follows.
    node.api("POST", f"/api/v1/tasks/{task['id']}/run")
    row.locator(".badge", has_text="pending").wait_for()
    assert still_same_page(dash)


def test_overview_totals_follow_new_tasks(dash: Dash, node, q: str) -> None:
    dash.goto("/")
    before = int(dash.page.locator('[data-total="scheduled"]').inner_text())
    mark_page(dash)
    node.enqueue(queue=q, type="demo", process_in="1h")
    node.enqueue(queue=q, type="demo", process_in="1h")
    dash.page.wait_for_function(
        "n => Number(document.querySelector('[data-total=\"scheduled\"]').textContent) >= n", arg=before + 2
    )
    dash.page.locator("#ov-queues").get_by_role("link", name=q).wait_for()
    assert still_same_page(dash)


def test_event_stream_filters_by_queue_and_kind(dash: Dash, node, q: str) -> None:
    dash.goto(f"/events/?queue={q}")
    other = node.enqueue(queue=f"{q}-other", type="demo", process_in="1h")
    mine = node.enqueue(queue=q, type="demo", process_in="1h")
    rows = dash.page.locator("#event-rows tr[data-kind]")
    dash.page.locator(f'#event-rows tr[data-task-id="{mine["id"]}"]').wait_for()
    # Both went out in order on one stream; the other queue's event was filtered by the server.
    assert dash.page.locator(f'#event-rows tr[data-task-id="{other["id"]}"]').count() == 0
    assert rows.first.locator(".badge").first.inner_text() == "scheduled"

    node.api("POST", f"/api/v1/tasks/{mine['id']}/cancel")
    canceled = dash.page.locator('#event-rows tr[data-kind="canceled"]')
    canceled.wait_for()
    # Unticking a kind hides its rows; the stream keeps the rest.
    dash.page.get_by_role("checkbox", name="canceled").uncheck()
    assert canceled.is_hidden()
    assert dash.page.locator('#event-rows tr[data-kind="scheduled"]').is_visible()
    assert dash.page.locator("#event-count").inner_text() == "2"
