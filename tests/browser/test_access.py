"""Staff login guards the dashboard; the Django admin stays available."""

from __future__ import annotations

from tests.browser.conftest import Dash, login


def test_login_leads_to_the_overview(anonymous: Dash) -> None:
    page = anonymous.page
    page.goto(anonymous.base + "/tasks/")
    assert "/admin/login/" in page.url, "an anonymous visitor must be sent to the staff login"
    login(page, anonymous.base, "/tasks/")
    page.wait_for_selector('#live-status[data-state="live"]')
    assert page.locator("h1").inner_text() == "Tasks"
    page.locator("nav.main-nav").get_by_role("link", name="Overview").click()
    page.wait_for_selector("#totals")
    assert page.locator("h1").inner_text().startswith("Overview")


def test_anonymous_changes_are_refused(anonymous: Dash, node, q: str) -> None:
    task = node.enqueue(queue=q, type="demo", process_in="1h")
    page = anonymous.page
    # A valid CSRF token (from the login page), so only the staff check stands in the way.
    page.goto(anonymous.base + "/admin/login/")
    token = page.locator('input[name="csrfmiddlewaretoken"]').input_value()
    headers = {"X-CSRFToken": token, "Referer": anonymous.base + "/"}
    for path, form in [
        (f"/queues/{q}/pause", {}),
        (f"/tasks/{task['id']}/cancel", {}),
        ("/tasks/actions", {"action": "delete", "ids": task["id"]}),
    ]:
        response = page.request.post(
            anonymous.base + path, form={"csrfmiddlewaretoken": token, **form}, headers=headers, max_redirects=0
        )
        assert response.status == 302 and "/admin/login/" in response.headers["location"], (path, response.status)
    assert node.task(task["id"])["state"] == "scheduled"
    assert not next(x for x in node.api("GET", "/api/v1/queues")["queues"] if x["name"] == q)["paused"]
    # Reads are guarded too, including the cron preview endpoint.
    response = page.request.get(anonymous.base + "/cron/preview?spec=@daily", max_redirects=0)
    assert response.status == 302


def test_django_admin_stays_available(dash: Dash) -> None:
    dash.page.goto(dash.base + "/admin/")
    assert dash.page.get_by_role("heading", name="Site administration").is_visible()
    assert dash.page.get_by_role("link", name="Cron entries").is_visible() or dash.page.locator("#content").is_visible()
