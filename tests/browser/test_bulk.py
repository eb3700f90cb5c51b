"""Bulk on a filter: "cancel all matching" cancels exactly the filter's tasks, in batches, with progress shown."""

from __future__ import annotations

from tests.browser.conftest import NARROW, Dash, DemoWorker
from tests.browser.test_search import enqueue_many
from tests.e2e.support import wait_for


def count(node, action: str, **filters: str) -> int:
    return node.api("GET", "/api/v1/tasks/count", params={"action": action, **filters})["count"]


def test_cancel_all_matching_cancels_exactly_those_while_another_queue_runs(dash: Dash, node, q: str) -> None:
    live = f"{q}-live"
    worker = DemoWorker(node, queues={live: 1}, types="demo", concurrency=8)
    try:
        enqueue_many(node, q, 5000, lambda i: {"metadata": {"batch": "b1"}, "process_in": None})
        enqueue_many(node, q, 200, lambda i: {"metadata": {"batch": "b2"}, "process_in": None})
        assert count(node, "cancel", queue=q, state="pending") == 5200

        dash.goto(f"/tasks/?queue={q}&where=metadata.batch+%3D+b1")
        cancel_all = dash.page.locator("#bulk-matching").get_by_role("button", name="Cancel all (5000)")
        cancel_all.click()
        dialog = dash.page.locator("#confirm-dialog")
        assert "Cancel all 5000 matching tasks?" in dialog.inner_text()
        # The other queue keeps running while the job works.
        during = [node.enqueue(queue=live, type="demo", retention=3600)["id"] for _ in range(5)]
        dialog.get_by_role("button", name="Cancel 5000").click()
        dash.page.locator(".msg-success", has_text="Started: cancel 5000 matching tasks.").wait_for()

        job = dash.page.locator("#bulk-jobs li").first
        job.wait_for()
        assert "of 5000 done" in job.inner_text()
        # Progress read back live, without a reload, until the job is done.
        dash.page.locator('#bulk-jobs li[data-state="done"]', has_text="5000 of 5000 done").wait_for(timeout=120_000)
        assert dash.page.locator("#bulk-jobs .meter span").first.get_attribute("style") == "width: 100%"

        assert count(node, "delete", queue=q, state="canceled", where="metadata.batch = b1") == 5000
        assert count(node, "cancel", queue=q, state="pending", where="metadata.batch = b2") == 200
        assert count(node, "cancel", queue=q, where="metadata.batch = b1") == 0
        wait_for(lambda: all(node.task(t)["state"] == "completed" for t in during), what="the live queue's tasks")
    finally:
        worker.stop()


def test_the_matching_bar_and_its_confirmation_follow_tasks_changed_elsewhere(dash: Dash, node, q: str) -> None:
    ids = enqueue_many(node, q, 5, lambda i: {"process_in": None})
    dash.goto(f"/tasks/?queue={q}")
    bar = dash.page.locator("#bulk-matching")
    bar.get_by_role("button", name="Cancel all (5)").wait_for()

    # Another operator cancels two of them (the API): the bar follows, without a reload.
    for task_id in ids[:2]:
        node.api("POST", f"/api/v1/tasks/{task_id}/cancel")
    bar.get_by_role("button", name="Cancel all (3)").wait_for()
    bar.get_by_role("button", name="Cancel all (3)").click()
    dialog = dash.page.locator("#confirm-dialog")
    assert "Cancel all 3 matching tasks?" in dialog.inner_text()

    # Two more change while the confirmation is open: it states the count it acts on now.
    for task_id in ids[2:4]:
        node.api("POST", f"/api/v1/tasks/{task_id}/cancel")
    dialog.get_by_text("Cancel all 1 matching task?").wait_for()
    dialog.get_by_role("button", name="Cancel 1").click()
    dash.page.locator(".msg-success", has_text="Started: cancel 1 matching task.").wait_for()
    dash.page.locator('#bulk-jobs li[data-state="done"]', has_text="1 of 1 done").wait_for()
    assert bar.get_by_role("button", name="Cancel all (0)").is_disabled()
    assert node.task(ids[4])["state"] == "canceled"


def test_a_finished_bulk_jobs_progress_stops_refreshing(dash: Dash, node, q: str) -> None:
    enqueue_many(node, q, 3, lambda i: {})
    dash.goto(f"/tasks/?queue={q}")
    dash.page.locator("#bulk-matching").get_by_role("button", name="Cancel all (3)").click()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Cancel 3").click()
    dash.page.locator('#bulk-jobs li[data-state="done"]', has_text="3 of 3 done").wait_for()
    # Nothing changes in this queue any more: the page has no reason to fetch itself again.
    dash.page.wait_for_timeout(1500)  # a refresh already asked for may still land
    refreshes: list[str] = []
    dash.page.on("request", lambda r: refreshes.append(r.url) if r.headers.get("x-dashboard-refresh") else None)
    dash.page.wait_for_timeout(4000)
    assert refreshes == [], f"{len(refreshes)} refreshes in 4 s after the job ended"


def test_at_phone_width_a_long_filter_and_its_bulk_job_wrap(narrow: Dash, node, q: str) -> None:
    queue = f"{q[:30]}-{'x' * 60}"  # a queue name may be 100 characters long
    enqueue_many(node, queue, 2, lambda i: {"metadata": {"batch": "b1"}})
    narrow.goto(f"/tasks/?queue={queue}&where=metadata.batch%3Db1")
    narrow.page.locator("#bulk-matching").get_by_role("button", name="Archive all (2)").click()
    narrow.page.locator("#confirm-dialog").get_by_role("button", name="Archive 2").click()
    narrow.page.locator('#bulk-jobs li[data-state="done"]', has_text="2 of 2 done").wait_for()
    assert narrow.horizontal_overflow() <= 0, f"the tasks page scrolls sideways at {NARROW['width']}px"
