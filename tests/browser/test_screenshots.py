"""Every page with realistic data, at desktop and phone widths: screenshots, no overflow, no console errors.

The screenshots land in a temporary directory; with ``UPDATE_SCREENSHOTS=1``
they replace the ones under ``docs/screenshots/`` (shown in docs/dashboard.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import DESKTOP, NARROW, Dash, DemoWorker, Node, NodePool, session_state
from tests.e2e.support import wait_for

HOUR = 3600


@pytest.fixture(scope="module")
def demo(nodes: NodePool) -> Iterator[dict[str, Any]]:
    """A node of its own, seeded like a small production system, with work flowing."""
    n = nodes.get("demo")
    workers = [
        # Credits split by weight: reports gets 4 of the 12 (two stay busy showing progress).
        DemoWorker(
            n,
            queues={"emails": 3, "reports": 2, "billing": 1},
            types="email.send,report.build,invoice.charge",
            concurrency=12,
            labels={"region": "eu-west-1", "host": "worker-a"},
        ),
        DemoWorker(
            n, queues={"images": 1}, types="image.resize", concurrency=4, labels={"gpu": "yes", "host": "worker-b"}
        ),
    ]
    stop = threading.Event()
    try:
        seeded = seed(n)
        feeder = threading.Thread(target=feed, args=(n, stop), daemon=True)
        feeder.start()
        yield {"node": n, **seeded}
    finally:
        stop.set()
        for w in workers:
            w.stop()


def seed(n: Node) -> dict[str, Any]:
    api = n.api
    api("PUT", "/api/v1/queues/emails/rate-limit", json={"rate": 50, "burst": 10})
    api("PUT", "/api/v1/queues/billing/concurrency-limit", json={"limit": 1})
    api("PUT", "/api/v1/queues/exports/policy", json={"policy": "lifo"})
    api(
        "PUT",
        "/api/v1/groups",
        json={"queue": "images", "group": "thumbnails", "max_size": 500, "max_delay": "1h", "grace": "1h"},
    )
    for i in range(18):
        n.enqueue(
            queue="emails",
            type="email.send",
            retention=HOUR,
            json={"to": f"user{i}@example.com", "template": "welcome"},
        )
    for i in range(2):
        n.enqueue(queue="emails", type="email.send", max_retry=5, json={"to": f"bounce{i}@example.net", "fail": True, "error": "SMTP 451: try again later"})  # fmt: skip
    n.enqueue(
        queue="emails",
        type="email.send",
        json={"to": "nobody@invalid", "skip": True, "error": "SMTP 550: mailbox unavailable"},
    )
    report = n.enqueue(
        queue="reports", type="report.build", json={"report": "revenue", "period": "2026-11", "progress": 62, "message": "aggregating invoices"},
        metadata={"tenant": "acme", "requested_by": "ops@acme.test"},
    )  # fmt: skip
    n.enqueue(
        queue="reports",
        type="report.build",
        json={"report": "churn", "period": "2026-11", "progress": 25, "message": "loading events"},
    )
    n.enqueue(
        queue="reports", type="email.send", json={"to": "finance@acme.test", "attach": "revenue"},
        depends_on=[{"task_id": report["id"], "on_failure": "cascade_cancel"}],
    )  # fmt: skip
    # Fails twice (a second apart), then succeeds: its page shows three attempts.
    flaky = n.enqueue(
        queue="billing", type="invoice.charge", retention=HOUR, max_retry=5,
        retry_policy={"kind": "fixed", "base": "1s"}, json={"invoice": 1042, "fail_times": 2},
    )  # fmt: skip
    for day in ("2026-11-30", "2026-12-01", "2026-12-02"):
        n.enqueue(
            queue="reports",
            type="report.build",
            process_in=6 * HOUR,
            unique_key=f"daily:{day}",
            json={"report": "daily", "day": day},
        )
    for i in range(4):
        n.enqueue(queue="billing", type="invoice.charge", retention=HOUR, concurrency_key=f"customer-{40 + i}", json={"invoice": 1000 + i, "amount_cents": 4999})  # fmt: skip
    n.enqueue(queue="billing", type="invoice.charge", concurrency_key="customer-7", json={"invoice": 977, "skip": True, "error": "card declined (insufficient funds)"})  # fmt: skip
    for i in range(2):
        t = n.enqueue(queue="billing", type="invoice.charge", process_in=HOUR, json={"invoice": 990 + i})
        api("POST", f"/api/v1/tasks/{t['id']}/cancel")
    for i in range(7):
        n.enqueue(queue="exports", type="export.csv", json={"table": "orders", "part": i})
    for i in range(5):
        n.enqueue(queue="images", type="image.resize", group="thumbnails", json={"image": f"img_{i}.jpg", "width": 320})
    api("POST", "/api/v1/cron", json={"id": "nightly-revenue", "spec": "0 2 * * *", "task_type": "report.build", "queue": "reports", "json": {"report": "revenue"}})  # fmt: skip
    api("POST", "/api/v1/cron", json={"id": "digest-emails", "spec": "*/15 * * * *", "task_type": "email.send", "queue": "emails", "timezone": "Europe/Berlin"})  # fmt: skip
    api("POST", "/api/v1/cron", json={"id": "purge-exports", "spec": "@hourly", "task_type": "export.purge", "queue": "exports", "paused": True})  # fmt: skip
    api("POST", "/api/v1/webhooks", json={"name": "partner-sync", "url": "https://partner.example.com/conveyor", "queues": {"partner": 2, "partner-bulk": 1}, "concurrency": 20, "secrets": ["whsec-demo"]})  # fmt: skip
    api("POST", "/api/v1/webhooks", json={"name": "legacy-crm", "url": "https://crm.example.org/hooks/tasks", "queues": {"crm": 1}, "concurrency": 2, "paused": True})  # fmt: skip

    last: dict[str, Any] = {}

    def settled() -> bool:
        counts = {q["name"]: q["counts"] for q in api("GET", "/api/v1/queues")["queues"]}
        last.update(counts)
        return (
            counts["reports"]["active"] == 2
            and counts["emails"]["archived"] >= 1
            and counts["billing"]["archived"] == 1
            and counts["emails"]["completed"] >= 18
            and counts["billing"]["completed"] == 5
        )

    try:
        wait_for(settled, timeout=30, what="the demo data to settle")
    except AssertionError:
        raise AssertionError(f"the demo data did not settle: {last}") from None
    return {"report": report, "flaky": flaky}


def feed(n: Node, stop: threading.Event) -> None:
    """A steady trickle of work, so live counters and the event stream have something to show."""
    i = 0
    while not stop.wait(0.25):
        i += 1
        try:
            n.enqueue(queue="emails", type="email.send", retention=HOUR, json={"to": f"live{i}@example.com"})
            if i % 9 == 0:
                n.enqueue(queue="emails", type="email.send", max_retry=0, json={"to": f"x{i}@invalid", "fail": True})
        except Exception:  # the node is stopping
            return


# The overview last: its live chart shows what this tab counted while visiting the rest.
PAGES = [
    ("queues", "/queues/"),
    ("queue-detail", "/queues/billing/"),
    ("tasks", "/tasks/?limit=25"),
    ("task-detail", "/tasks/{report}/"),
    ("task-attempts", "/tasks/{flaky}/"),
    ("limits", "/limits/"),
    ("workers", "/workers/"),
    ("cron", "/cron/"),
    ("cron-form", "/cron/nightly-revenue/edit"),
    ("webhooks", "/webhooks/"),
    ("webhook-form", "/webhooks/partner-sync/edit"),
    ("events", "/events/"),
    ("overview", "/"),
]


@pytest.mark.parametrize("width", ["desktop", "narrow"])
def test_every_page_renders_at_both_widths(
    browser: Any, demo: dict[str, Any], screenshot_dir: Path, width: str
) -> None:
    n: Node = demo["node"]
    context = browser.new_context(viewport=DESKTOP if width == "desktop" else NARROW, storage_state=session_state(n))
    context.set_default_timeout(20_000)
    dash = Dash(context.new_page(), n.url)
    try:
        for name, path in PAGES:
            dash.goto(path.format(report=demo["report"]["id"], flaky=demo["flaky"]["id"]))
            ready(dash, name)
            dash.screenshot(f"{name}-{width}", screenshot_dir)
            if width == "narrow":
                assert dash.horizontal_overflow() <= 0, f"{name} scrolls sideways at {NARROW['width']}px"
    finally:
        context.close()
    assert not dash.unexpected_errors(), dash.unexpected_errors()


def ready(dash: Dash, name: str) -> None:
    """Wait until the page shows what makes its screenshot worth having."""
    page = dash.page
    if name == "overview":
        page.wait_for_function("Number(document.getElementById('rate-completed').textContent) > 0")
        page.locator("#chart-live polyline").first.wait_for(state="attached")
    elif name == "queues":
        # Live throughput of the busy queue, once its first completions were counted.
        page.wait_for_function("parseFloat(document.querySelector('[data-throughput=\"emails\"]').textContent) > 0")
    elif name == "task-detail":
        page.locator(".progress-text", has_text="62%").wait_for()
    elif name == "task-attempts":
        page.locator("li.attempt[data-attempt='3']").wait_for()
    elif name == "workers":
        page.locator("tr[data-session]").nth(1).wait_for()
    elif name == "limits":
        page.locator("#limits-table tr[data-queue]").first.wait_for()
    elif name == "cron-form":
        page.locator("#spec-preview li").nth(4).wait_for()
    elif name == "events":
        page.locator("#event-rows tr[data-kind]").nth(11).wait_for()
