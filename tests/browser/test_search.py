"""Search inside tasks from the task list's filter bar: metadata and payload conditions among 10,000 tasks."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Dash

TASKS = 10_000


def enqueue_many(node: Any, q: str, count: int, make: Any) -> list[str]:
    """*count* tasks of queue *q* in batches of 1,000; *make(i)* gives each one's body."""
    ids: list[str] = []
    for start in range(0, count, 1000):
        items = [{k: v for k, v in {"queue": q, "type": "search.demo", "process_in": "1h", **make(i)}.items()
                  if v is not None} for i in range(start, min(start + 1000, count))]  # fmt: skip
        results = node.api("POST", "/api/v1/tasks/batch", json={"tasks": items})["results"]
        ids += [r["task"]["id"] for r in results]
    return ids


def listed(dash: Dash) -> set[str]:
    return set(
        dash.page.locator("#task-table tbody tr[data-task-id]").evaluate_all("rs => rs.map(r => r.dataset.taskId)")
    )


def test_metadata_and_payload_searches_find_the_right_tasks_among_10000(dash: Dash, node, q: str) -> None:
    def body(i: int) -> dict[str, Any]:
        return {"json": {"user_id": i, "order": {"region": "eu" if i % 2 else "us"}},
                "metadata": {"tenant": "acme" if i % 1000 == 7 else f"t{i % 50}"}}  # fmt: skip

    ids = enqueue_many(node, q, TASKS, body)
    acme = {ids[i] for i in range(TASKS) if i % 1000 == 7}
    dash.goto(f"/tasks/?queue={q}&limit=50")

    # The metadata search, typed into the filter bar.
    dash.page.fill("#f-where", "metadata.tenant = acme")
    dash.page.get_by_role("button", name="Filter").click()
    dash.page.wait_for_url("**where=metadata.tenant**")
    assert listed(dash) == acme and len(acme) == 10

    # A payload path: one task of 10,000; a nested path and a metadata condition together.
    dash.page.fill("#f-where", "payload.user_id = 4242")
    dash.page.get_by_role("button", name="Filter").click()
    dash.page.wait_for_url("**user_id**")
    assert listed(dash) == {ids[4242]}
    dash.page.fill("#f-where", 'metadata.tenant = acme and payload.order.region = "eu"')
    dash.page.get_by_role("button", name="Filter").click()
    dash.page.wait_for_url("**region**")
    assert listed(dash) == {ids[i] for i in range(TASKS) if i % 1000 == 7 and i % 2} and len(listed(dash)) == 10

    # The page says what cannot be searched.
    assert "encrypted at rest or end to end are not searchable" in dash.page.locator("#search-note").inner_text()


def test_a_bad_condition_is_shown_not_a_crash(dash: Dash, node, q: str) -> None:
    node.enqueue(queue=q, type="search.demo", process_in="1h", json={"user_id": 1})
    dash.goto(f"/tasks/?queue={q}&where=user_id%3D1")
    error = dash.page.locator(".msg-error")
    assert "where: expected payload.<path> = <value>" in error.inner_text()
    assert listed(dash) == set()
