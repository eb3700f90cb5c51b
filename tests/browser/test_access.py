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
    node.enqueue(queue=q, type="demo")
    response = anonymous.page.request.post(f"{anonymous.base}/queues/{q}/pause", max_redirects=0)
    # Django's CSRF check (403) or the staff login redirect (302): either way nothing changes.
    assert response.status in (302, 403)
    queues = {x["name"]: x for x in node.api("GET", "/api/v1/queues")["queues"]}
    assert queues[q]["paused"] is False


def test_django_admin_stays_available(dash: Dash) -> None:
    dash.page.goto(dash.base + "/admin/")
    assert dash.page.get_by_role("heading", name="Site administration").is_visible()
    assert dash.page.get_by_role("link", name="Cron entries").is_visible() or dash.page.locator("#content").is_visible()
