"""The task page's attempt history: every attempt on a timeline, with its worker, node and error."""

from __future__ import annotations

from tests.browser.conftest import Dash
from tests.e2e.support import wait_for


def test_a_task_that_fails_three_times_then_succeeds_shows_four_attempts_with_errors_and_workers(
    dash: Dash, node, q: str
) -> None:
    from tests.browser.conftest import DemoWorker

    worker = DemoWorker(node, queues={q: 1}, types="demo", concurrency=1, labels={"host": "attempts-w1"})
    try:
        (session,) = [s for s in node.api("GET", "/api/v1/workers")["workers"] if set(s["queues"]) == {q}]
        task = node.enqueue(queue=q, type="demo", json={"fail_times": 3}, retry_policy={"kind": "fixed", "base": 0.2})
        wait_for(lambda: node.task(task["id"])["state"] == "completed", timeout=30, what="the task to complete")
    finally:
        worker.stop()

    dash.goto(f"/tasks/{task['id']}/")
    attempts = dash.page.locator("#attempts li.attempt")
    assert attempts.count() == 4
    assert [a.get_attribute("data-attempt") for a in attempts.all()] == ["1", "2", "3", "4"]
    assert [a.locator(".badge").first.inner_text() for a in attempts.all()] == ["retry", "retry", "retry", "completed"]
    for attempt in attempts.all():
        assert attempt.locator(".attempt-session").inner_text() == session["id"]
        assert attempt.locator(".attempt-node").inner_text() == session["node"]
        assert "host=attempts-w1" in attempt.locator(".attempt-who").inner_text()

    # Each failure's error, its traceback folded away until opened; the success has none.
    for n in range(3):
        error = attempts.nth(n).locator("details.attempt-error")
        assert error.locator("summary").inner_text() == f"RuntimeError: attempt {n + 1} failed on purpose"
        assert not error.locator("pre").is_visible()
        error.locator("summary").click()
        trace = error.locator("pre").inner_text()
        assert "Traceback (most recent call last)" in trace and "demo_worker.py" in trace
    assert attempts.nth(3).locator("details").count() == 0
