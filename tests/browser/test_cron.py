"""Cron: spec validation with a live preview, add, pause, resume, edit, delete."""

from __future__ import annotations

from tests.browser.conftest import Dash, api


def test_invalid_cron_spec_shows_the_error(dash: Dash, node, q: str) -> None:
    entry = f"{q}-nightly"
    dash.goto("/cron/new")
    dash.page.fill("#c-id", entry)
    dash.page.fill("#c-type", "report.build")
    dash.page.fill("#c-queue", q)
    dash.page.fill("#c-spec", "every tuesday")
    # The preview says what is wrong while typing...
    preview = dash.page.locator("#spec-preview .preview-error")
    preview.wait_for()
    assert "5 fields" in preview.inner_text()
    # ...and the server refuses it on submit, next to the field, keeping what was typed.
    dash.page.get_by_role("button", name="Add entry").click()
    error = dash.page.locator("#spec-error")
    error.wait_for()
    assert "must have 5 fields (minute first) or 6 (seconds first)" in error.inner_text()
    assert dash.page.locator("#c-spec").get_attribute("aria-invalid") == "true"
    assert dash.page.locator("#c-id").input_value() == entry
    assert api(node, "GET", f"/api/v1/cron/{entry}").status_code == 404

    # A spec croniter rejects gets its message too.
    dash.page.fill("#c-spec", "61 * * * *")
    dash.page.locator("#spec-preview .preview-error", has_text="invalid cron spec").wait_for()

    dash.page.fill("#c-spec", "*/10 * * * *")
    fires = dash.page.locator("#spec-preview li")
    fires.nth(4).wait_for()
    assert fires.count() == 5
    dash.page.fill("#c-payload", '{"report": "daily"}')
    dash.page.get_by_role("button", name="Add entry").click()
    dash.page.locator(".msg-success", has_text=f"Cron entry {entry} saved").wait_for()
    stored = node.api("GET", f"/api/v1/cron/{entry}")
    assert stored["spec"] == "*/10 * * * *" and stored["json"] == {"report": "daily"} and stored["queue"] == q
    row = dash.page.locator(f'tr[data-cron="{entry}"]')
    assert "*/10 * * * *" in row.inner_text() and "report.build" in row.inner_text()


def test_bad_payload_and_duplicate_id_are_refused(dash: Dash, node, q: str) -> None:
    entry = f"{q}-e"
    node.api("POST", "/api/v1/cron", json={"id": entry, "spec": "@hourly", "task_type": "demo", "queue": q})
    dash.goto("/cron/new")
    dash.page.fill("#c-id", entry)
    dash.page.fill("#c-spec", "@daily")
    dash.page.fill("#c-type", "demo")
    dash.page.fill("#c-payload", "{not json")
    dash.page.get_by_role("button", name="Add entry").click()
    dash.page.locator("#id-error", has_text="exists already").wait_for()
    dash.page.fill("#c-id", f"{entry}-2")
    dash.page.get_by_role("button", name="Add entry").click()
    dash.page.locator("#payload-error", has_text="is not valid JSON").wait_for()
    dash.page.fill("#c-payload", "")
    dash.page.fill("#c-options", '{"colour": "blue"}')
    dash.page.get_by_role("button", name="Add entry").click()
    dash.page.locator("#options-error", has_text="is not a cron task option").wait_for()
    assert node.api("GET", f"/api/v1/cron/{entry}")["spec"] == "@hourly"


def test_pause_resume_edit_delete(dash: Dash, node, q: str) -> None:
    entry = f"{q}-job"
    node.api("POST", "/api/v1/cron", json={"id": entry, "spec": "*/5 * * * *", "task_type": "demo", "queue": q})
    dash.goto("/cron/")
    row = dash.page.locator(f'tr[data-cron="{entry}"]')
    row.get_by_role("button", name="Pause").click()
    dash.page.locator(".msg-success", has_text=f"Cron entry {entry} paused").wait_for()
    assert node.api("GET", f"/api/v1/cron/{entry}")["paused"] is True
    row.get_by_role("button", name="Resume").click()
    dash.page.locator(".msg-success", has_text=f"Cron entry {entry} resumed").wait_for()
    assert node.api("GET", f"/api/v1/cron/{entry}")["paused"] is False

    row.get_by_role("link", name=f"Edit {entry}").click()
    dash.page.wait_for_url(f"**/cron/{entry}/edit")
    assert dash.page.locator("#c-id").get_attribute("readonly") is not None
    assert dash.page.locator("#c-spec").input_value() == "*/5 * * * *"
    dash.page.locator("#spec-preview li").nth(4).wait_for()
    dash.page.fill("#c-tz", "Europe/Berlin")
    dash.page.fill("#c-spec", "0 9 * * 1-5")
    # The preview speaks the entry's wall clock: 09:00 in Berlin, with UTC beside it.
    first = dash.page.locator("#spec-preview li").first
    first.filter(has_text="09:00:00 CE").wait_for()
    assert " UTC" in first.inner_text()
    dash.page.get_by_role("button", name="Save entry").click()
    dash.page.locator(".msg-success", has_text=f"Cron entry {entry} saved").wait_for()
    stored = node.api("GET", f"/api/v1/cron/{entry}")
    assert (stored["spec"], stored["timezone"]) == ("0 9 * * 1-5", "Europe/Berlin")

    dash.page.locator(f'tr[data-cron="{entry}"]').get_by_role("button", name="Delete").click()
    assert entry in dash.page.locator("#confirm-dialog").inner_text()
    dash.page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    dash.page.locator(".msg-success", has_text=f"Cron entry {entry} deleted").wait_for()
    assert api(node, "GET", f"/api/v1/cron/{entry}").status_code == 404
