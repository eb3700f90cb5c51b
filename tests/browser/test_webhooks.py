"""Webhook registrations: add, edit, pause, resume, delete; secrets are write-only."""

from __future__ import annotations

from tests.browser.conftest import Dash, api

SECRET = "whsec-Sup3r-s3cret-value"
ROTATED = "whsec-n3w-r0tated-value"


def test_add_a_webhook_registration(dash: Dash, node, q: str) -> None:
    name = f"{q}-hook"
    dash.goto("/webhooks/")
    dash.page.get_by_role("link", name="Add registration").click()
    dash.page.wait_for_url("**/webhooks/new")
    dash.page.fill("#w-name", name)
    dash.page.fill("#w-url", "not a url")
    dash.page.fill("#w-queues", f"{q}=2, {q}-low")
    dash.page.fill("#w-conc", "5")
    dash.page.fill("#w-timeout", "15s")
    dash.page.fill("#w-secret", SECRET)
    dash.page.get_by_role("button", name="Add registration").click()
    dash.page.locator("#url-error", has_text="absolute http:// or https:// URL").wait_for()
    assert api(node, "GET", f"/api/v1/webhooks/{name}").status_code == 404
    assert SECRET not in dash.page.content(), "a refused form must not echo the secret back"

    dash.page.fill("#w-url", "http://127.0.0.1:9/hooks/billing")
    dash.page.fill("#w-secret", SECRET)
    dash.page.get_by_role("button", name="Add registration").click()
    dash.page.locator(".msg-success", has_text=f"Webhook registration {name} saved").wait_for()
    row = dash.page.locator(f'tr[data-webhook="{name}"]')
    text = row.inner_text()
    assert f"{q} ×2" in text and f"{q}-low ×1" in text and "1 secret" in text and "active" in text
    assert SECRET not in dash.page.content()
    stored = node.api("GET", f"/api/v1/webhooks/{name}")
    assert stored["queues"] == {q: 2, f"{q}-low": 1}
    assert (stored["concurrency"], stored["request_timeout"], stored["secret_count"]) == (5, 15.0, 1)


def test_edit_keeps_or_rotates_secrets_and_pause_delete(dash: Dash, node, q: str) -> None:
    name = f"{q}-hook"
    node.api(
        "POST", "/api/v1/webhooks",
        json={"name": name, "url": "http://127.0.0.1:9/a", "queues": {q: 1}, "secrets": [SECRET]},
    )  # fmt: skip
    dash.goto(f"/webhooks/{name}/edit")
    assert SECRET not in dash.page.content()
    assert dash.page.locator("#w-secret").input_value() == ""
    dash.page.fill("#w-conc", "7")
    dash.page.get_by_role("button", name="Save registration").click()
    dash.page.locator(".msg-success", has_text="saved").wait_for()
    assert node.api("GET", f"/api/v1/webhooks/{name}")["secret_count"] == 1, "an empty secret field keeps the secret"

    dash.page.locator(f'tr[data-webhook="{name}"]').get_by_role("link", name=f"Edit {name}").click()
    dash.page.fill("#w-secret", ROTATED)
    dash.page.get_by_role("button", name="Save registration").click()
    dash.page.locator(".msg-success", has_text="saved").wait_for()
    stored = node.api("GET", f"/api/v1/webhooks/{name}")
    assert (stored["concurrency"], stored["secret_count"]) == (7, 2), "rotation keeps the previous secret"

    row = dash.page.locator(f'tr[data-webhook="{name}"]')
    row.get_by_role("button", name="Pause").click()
    dash.page.locator(".msg-success", has_text=f"{name} paused").wait_for()
    assert row.locator(".badge", has_text="paused").is_visible()
    assert node.api("GET", f"/api/v1/webhooks/{name}")["paused"] is True
    row.get_by_role("button", name="Resume").click()
    dash.page.locator(".msg-success", has_text=f"{name} resumed").wait_for()

    row.get_by_role("button", name="Delete").click()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    dash.page.locator(".msg-success", has_text=f"{name} deleted").wait_for()
    assert api(node, "GET", f"/api/v1/webhooks/{name}").status_code == 404
