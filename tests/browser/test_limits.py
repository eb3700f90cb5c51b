"""The limits page: every queue's rate limit, concurrency limit and active tasks per concurrency key."""

from __future__ import annotations

from tests.browser.conftest import Dash, DemoWorker
from tests.e2e.support import wait_for


def test_limits_page_shows_rates_caps_and_the_keys_in_use(dash: Dash, node, q: str) -> None:
    capped, free = f"{q}-capped", f"{q}-free"
    node.api("PUT", f"/api/v1/queues/{free}/rate-limit", json={"rate": 2.5, "burst": 4})
    node.api("PUT", f"/api/v1/queues/{capped}/concurrency-limit", json={"limit": 2})
    node.enqueue(queue=free, type="demo", process_in="1h")  # the queue exists, nothing runs
    worker = DemoWorker(node, queues={capped: 1}, types="demo", concurrency=8)
    try:
        busy = [node.enqueue(queue=capped, type="demo", json={"sleep": 60}, concurrency_key="acct-1")["id"]
                for _ in range(3)]  # fmt: skip
        other = node.enqueue(queue=capped, type="demo", json={"sleep": 60}, concurrency_key="acct-2")["id"]
        wait_for(lambda: sum(node.task(t)["state"] == "active" for t in [*busy, other]) == 3, what="3 active tasks")

        dash.goto("/limits/")
        row = dash.page.locator(f'#limits-table tr[data-queue="{capped}"]')
        assert row.locator('[data-col="cap"]').inner_text() == "2 per key"
        assert row.locator('[data-col="rate"]').inner_text() == "none"
        assert row.locator('[data-col="active"]').inner_text() == "3"
        full = row.locator('[data-key="acct-1"]')
        assert full.inner_text() == "acct-1 2/2" and "chip-warn" in (full.get_attribute("class") or "")
        assert row.locator('[data-key="acct-2"]').inner_text() == "acct-2 1/2"

        rated = dash.page.locator(f'#limits-table tr[data-queue="{free}"]')
        assert rated.locator('[data-col="rate"]').inner_text() == "2.5/s"
        assert rated.locator('[data-col="burst"]').inner_text() == "4"
        assert rated.locator('[data-col="cap"]').inner_text() == "none"
        assert dash.page.locator('nav.main-nav a[aria-current="page"]').inner_text() == "Limits"
    finally:
        worker.stop()
