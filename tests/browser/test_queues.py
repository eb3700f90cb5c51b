"""Queues: pausing stops dispatch; limits and policy are edited through the broker."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Dash, DemoWorker
from tests.e2e.support import wait_for


def queue_row(dash: Dash, name: str) -> Any:
    return dash.page.locator(f'#queue-table tr[data-queue="{name}"]')


def state_of(node, task_id: str) -> str:
    return node.task(task_id)["state"]


def test_pausing_a_queue_stops_dispatch(dash: Dash, node, q: str) -> None:
    control = f"{q}-control"
    worker = DemoWorker(node, queues={q: 1, control: 1}, types="demo", concurrency=4)
    try:
        first = node.enqueue(queue=q, type="demo", retention=3600)
        wait_for(lambda: state_of(node, first["id"]) == "completed", what="dispatch before the pause")

        dash.goto("/queues/")
        row = queue_row(dash, q)
        row.get_by_role("button", name="Pause").click()
        dash.page.locator(".msg-success", has_text=f"Queue {q} paused").wait_for()
        assert row.locator(".badge", has_text="paused").is_visible()
        assert any(x["name"] == q and x["paused"] for x in node.api("GET", "/api/v1/queues")["queues"])

        held = node.enqueue(queue=q, type="demo", retention=3600)
        # The same worker still serves the other queue: a task enqueued after
        # the held one completes, so dispatch runs, just not from the paused queue.
        later = node.enqueue(queue=control, type="demo", retention=3600)
        wait_for(lambda: state_of(node, later["id"]) == "completed", what="the control queue to dispatch")
        assert state_of(node, held["id"]) == "pending"
        # The page shows it waiting, live.
        row.get_by_role("link", name=f"1 pending in {q}").wait_for()

        # The queue's page names what serves it.
        dash.goto(f"/queues/{q}/")
        served = dash.page.locator("#served-by")
        session = next(s for s in node.api("GET", "/api/v1/workers")["workers"] if q in s["queues"])
        served_row = served.locator("tr", has=dash.page.get_by_role("link", name=session["id"]))
        assert served_row.locator("td.num").first.inner_text() == "1"
        dash.goto("/queues/")
        row.get_by_role("button", name="Resume").click()
        dash.page.locator(".msg-success", has_text=f"Queue {q} resumed").wait_for()
        wait_for(lambda: state_of(node, held["id"]) == "completed", what="dispatch after resuming")
        queue_row(dash, q).get_by_role("link", name=f"2 completed in {q}").wait_for()
    finally:
        worker.stop()


def test_edit_the_concurrency_limit(dash: Dash, node, q: str) -> None:
    node.enqueue(queue=q, type="demo", process_in="1h")
    dash.goto(f"/queues/{q}/")
    assert dash.page.locator("#current-concurrency-limit").inner_text() == "none"
    assert "Nothing serves this queue" in dash.page.locator("#served-by").inner_text()

    # A refused value: the broker's message, nothing stored.
    dash.page.fill("#limit", "0")
    dash.page.get_by_role("button", name="Save concurrency limit").click()
    error = dash.page.locator(".msg-error")
    error.wait_for()
    assert "Could not set the concurrency limit" in error.inner_text() and "limit" in error.inner_text()
    assert all(c["queue"] != q for c in node.api("GET", "/api/v1/limits")["concurrency_limits"])

    dash.page.fill("#limit", "3")
    dash.page.get_by_role("button", name="Save concurrency limit").click()
    dash.page.locator(".msg-success", has_text="at most 3 active tasks per concurrency key").wait_for()
    assert dash.page.locator("#current-concurrency-limit").inner_text() == "3"
    assert dash.page.locator("#limit").input_value() == "3"
    assert {"queue": q, "limit": 3} in node.api("GET", "/api/v1/limits")["concurrency_limits"]

    dash.goto("/queues/")
    assert queue_row(dash, q).locator(".limits").inner_text().strip() == "≤3/key"

    # Removing asks first.
    dash.goto(f"/queues/{q}/")
    dash.page.locator("#conc-h").locator("..").get_by_role("button", name="Remove").click()
    dialog = dash.page.locator("#confirm-dialog")
    assert dialog.is_visible() and f"concurrency limit of {q}" in dialog.inner_text()
    dialog.get_by_role("button", name="Confirm").click()
    dash.page.locator(".msg-success", has_text=f"Concurrency limit of queue {q} removed").wait_for()
    assert all(c["queue"] != q for c in node.api("GET", "/api/v1/limits")["concurrency_limits"])


def test_rate_limit_policy_and_group_config(dash: Dash, node, q: str) -> None:
    node.enqueue(queue=q, type="demo", process_in="1h")
    dash.goto(f"/queues/{q}/")
    dash.page.fill("#rate", "2.5")
    dash.page.fill("#burst", "5")
    dash.page.get_by_role("button", name="Save rate limit").click()
    dash.page.locator(".msg-success", has_text="limited to 2.5 tasks/s (burst 5)").wait_for()
    assert {"queue": q, "rate": 2.5, "burst": 5} in node.api("GET", "/api/v1/limits")["rate_limits"]

    dash.page.select_option("#policy", "lifo")
    dash.page.get_by_role("button", name="Save policy").click()
    dash.page.locator(".msg-success", has_text="lifo").wait_for()
    assert any(x["name"] == q and x["policy"] == "lifo" for x in node.api("GET", "/api/v1/queues")["queues"])

    dash.page.fill("#g-group", "digest")
    dash.page.fill("#g-size", "50")
    dash.page.fill("#g-delay", "2m")
    dash.page.fill("#g-grace", "5s")
    dash.page.get_by_role("button", name="Save group config").click()
    dash.page.locator(".msg-success", has_text="max size 50, max delay 120s, grace 5s").wait_for()
    configs = node.api("GET", "/api/v1/groups")["configs"]
    assert {"queue": q, "group": "digest", "max_size": 50, "max_delay": 120.0, "grace": 5.0} in configs
    assert dash.page.locator("#groups").get_by_role("cell", name="digest").is_visible()

    dash.page.fill("#g-delay", "soon")
    dash.page.get_by_role("button", name="Save group config").click()
    dash.page.locator(".msg-error", has_text="max_delay").wait_for()
