"""Overview: live rates from the event stream, history charts, sweeper leaders."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from tests.browser.conftest import Dash, DemoWorker


def test_live_rates_and_sweeper_leaders(dash: Dash, node, q: str) -> None:
    worker = DemoWorker(node, queues={q: 1}, types="demo", concurrency=4, labels={"host": "rates-box"})
    try:
        dash.goto("/")
        for _ in range(6):
            node.enqueue(queue=q, type="demo")
        node.enqueue(queue=q, type="demo", max_retry=0, json={"fail": True})
        dash.page.wait_for_function("Number(document.getElementById('rate-completed').textContent) > 0")
        dash.page.wait_for_function("Number(document.getElementById('rate-failed').textContent) > 0")
        # The live chart plots the same counts, one point a second.
        points = dash.page.locator("#chart-live polyline.line-ok").get_attribute("points")
        assert points is not None and len(points.split()) == 60

        node_id = node.api("GET", "/api/v1/cluster")["nodes"][0]["id"]
        leaders = dash.page.locator("dl.leaders")
        for sweeper in ("scheduler", "reaper", "groups"):
            leaders.locator("div", has=dash.page.locator("dt", has_text=sweeper)).get_by_role(
                "link", name=node_id
            ).wait_for()
        # The node's row lists its worker sessions (by host label).
        node_row = dash.page.locator(f'#ov-cluster tr[id="node-{node_id}"]')
        node_row.locator(".sessions .chip", has_text="rates-box").wait_for()
    finally:
        worker.stop()


def test_history_charts_read_the_stats_history_shape(dash: Dash, node) -> None:
    has_history = node.http.get("/api/v1/stats/history", params={"minutes": 60}).status_code == 200
    if not has_history:
        # Until the server has the endpoint, the charts say so and stay empty.
        dash.goto("/")
        note = dash.page.locator("#chart-throughput svg text.note")
        note.wait_for()
        assert "no per-minute history" in (note.text_content() or "")
        assert dash.page.locator("#chart-backlog svg text.note").is_visible()
        return
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    minute = lambda ago: (now - timedelta(minutes=ago)).isoformat().replace("+00:00", "Z")  # noqa: E731
    series = [
        {"minute": minute(10), "queue": "a", "enqueued": 120, "completed": 60, "failed": 6, "backlog": 30},
        {"minute": minute(10), "queue": "b", "enqueued": 0, "completed": 60, "failed": 0, "backlog": 10},
        {"minute": minute(5), "queue": "a", "enqueued": 0, "completed": 120, "failed": 0, "backlog": 0},
    ]
    dash.page.route(
        re.compile(r"/api/v1/stats/history\?"),
        lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps({"series": series})),
    )
    dash.goto("/")
    ok = dash.page.locator("#chart-throughput polyline.line-ok")
    ok.wait_for(state="attached")
    values = dash.page.evaluate(
        "end => window.Conveyor.History.minutes(null, end).map(m => [m.completed, m.failed, m.backlog])",
        now.timestamp() * 1000,
    )
    assert len(values) == 60
    assert values[49] == [120, 6, 40], "two queues in one minute add up"
    assert values[54] == [120, 0, 10], "queue a's backlog fell to 0; b's carries forward"
    assert values[59][2] == 10


def test_the_cluster_table_fits_a_phone_screen(narrow: Dash, node, q: str) -> None:
    worker = DemoWorker(node, queues={q: 1}, types="demo", labels={"host": "a-rather-long-worker-host-name"})
    try:
        narrow.goto("/")
        narrow.page.locator("#ov-cluster .sessions .chip", has_text="a-rather-long-worker-host-name").wait_for()
        # Nothing of the table is hidden behind a horizontal scroll (390 px wide).
        hidden = narrow.page.evaluate(
            "(() => { const w = document.querySelector('#ov-cluster .table-wrap'); return w.scrollWidth - w.clientWidth; })()"
        )
        assert hidden <= 0, f"{hidden} px of the cluster table are cut off"
        assert narrow.horizontal_overflow() <= 0
    finally:
        worker.stop()
