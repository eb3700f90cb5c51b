"""Bulk on a filter: "cancel all matching" cancels exactly the filter's tasks, in batches, with progress shown."""

from __future__ import annotations

from tests.browser.conftest import Dash, DemoWorker
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
        assert "Cancel all 5000 matching task(s)?" in dialog.inner_text()
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
