"""``conveyor cron add|list|pause|resume|delete``."""

from __future__ import annotations

import json

import pytest

from conveyor.broker.types import CronSpec
from conveyor.models import CronEntry
from tests.cli.support import fails, run, table

pytestmark = pytest.mark.django_db(transaction=True)


def test_cron_add_stores_the_entry_with_its_options(broker):
    result = run(
        "cron", "add", "nightly", "0 3 * * *", "report:build", "--queue", "reports", "--json-payload", '{"kind": "daily"}',
        "--timezone", "Europe/Paris", "--option", "priority=7", "--option", "timeout=10m",
        "--option", 'metadata={"team": "data"}',
    )  # fmt: skip

    entry = broker.get_cron_entry("nightly")
    assert result.out.startswith("cron entry nightly: report:build on reports at '0 3 * * *' (next run ")
    assert (entry.spec, entry.task_type, entry.queue, entry.timezone) == (
        "0 3 * * *",
        "report:build",
        "reports",
        "Europe/Paris",
    )
    assert json.loads(bytes(entry.payload)) == {"kind": "daily"}
    assert entry.options == {"priority": 7, "timeout": 600.0, "metadata": {"team": "data"}}
    assert not entry.paused


def test_cron_add_paused_json(broker):
    data = run("--json", "cron", "add", "every5", "*/5 * * * *", "ping", "--paused").json()

    assert (data["id"], data["paused"]) == ("every5", True)
    assert broker.get_cron_entry("every5").paused


def test_cron_add_invalid_spec_stores_nothing():
    assert (
        fails("cron", "add", "bad", "every day", "x") == "spec: must have 5 fields (minute first) or 6 (seconds first)"
    )
    assert fails("cron", "add", "bad", "* * * * 9", "x") == "spec: invalid cron spec '* * * * 9'"
    assert not CronEntry.objects.exists()


def test_cron_add_bad_option_or_zone_names_the_flag():
    assert fails("cron", "add", "c", "* * * * *", "x", "--option", "colour=red").startswith(
        "--option colour: is not a cron task option"
    )
    assert fails("cron", "add", "c", "* * * * *", "x", "--option", "timeout=never").startswith(
        "--option timeout: invalid duration 'never'"
    )
    assert (
        fails("cron", "add", "c", "* * * * *", "x", "--timezone", "Mars/Base")
        == "--timezone: unknown time zone 'Mars/Base'"
    )
    assert not CronEntry.objects.exists()


def test_cron_list(broker):
    broker.upsert_cron_entry(CronSpec(id="b-entry", spec="@hourly", task_type="ping", paused=True))
    broker.upsert_cron_entry(CronSpec(id="a-entry", spec="*/5 * * * *", task_type="sync", queue="ops"))

    rows = table(run("cron", "list"))

    assert rows[0] == ["ID", "SPEC", "TIMEZONE", "TASK_TYPE", "QUEUE", "PAUSED", "NEXT_RUN", "LAST_RUN"]
    assert rows[1][0] == "a-entry" and rows[1][-5:-3] == ["ops", "no"]
    assert rows[2] == ["b-entry", "@hourly", "UTC", "ping", "default", "yes", "-", "-"]
    assert [e["id"] for e in run("--json", "cron", "list").json()["entries"]] == ["a-entry", "b-entry"]


def test_cron_pause_and_resume(broker):
    broker.upsert_cron_entry(CronSpec(id="c", spec="@hourly", task_type="ping"))

    assert run("cron", "pause", "c").out.strip() == "paused cron entry c"
    assert broker.get_cron_entry("c").paused
    assert run("cron", "resume", "c").out.startswith("resumed cron entry c (next run ")
    assert not broker.get_cron_entry("c").paused


def test_cron_pause_unknown_entry_fails():
    assert fails("cron", "pause", "ghost") == "cron entry ghost not found"


def test_cron_delete(broker):
    broker.upsert_cron_entry(CronSpec(id="c", spec="@hourly", task_type="ping"))

    assert run("cron", "delete", "c").out.strip() == "deleted cron entry c"
    assert not CronEntry.objects.exists()
    assert run("--json", "cron", "delete", "c").json() == {"id": "c", "deleted": False}
