"""``conveyor group set|rm|ls``."""

from __future__ import annotations

import pytest

from conveyor.broker import TaskSpec
from tests.cli.support import fails, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_group_set_queue_default(broker):
    result = run("group", "set", "mail", "--max-size", "50", "--max-delay", "2m", "--grace", "5s")

    assert result.out.strip() == "queue mail, group (queue default): fire at 50 tasks, after 2m max delay or 5s grace"
    cfg = broker.group_config("mail", "any-group")
    assert (cfg.max_size, cfg.max_delay, cfg.grace) == (50, 120.0, 5.0)


def test_group_set_named_group_json(broker):
    data = run("--json", "group", "set", "mail", "--group", "digest", "--max-delay", "90").json()

    assert data == {"queue": "mail", "group": "digest", "max_size": 100, "max_delay": 90.0, "grace": 10.0}
    assert broker.group_config("mail", "digest").max_delay == 90.0


def test_group_ls_shows_thresholds_and_groups_aggregating(broker):
    broker.set_group_config("mail", "", max_size=50)
    broker.set_group_config("mail", "digest", max_delay=90)
    broker.enqueue(TaskSpec(type="d", queue="mail", group="digest"))
    broker.enqueue(TaskSpec(type="d", queue="mail", group="digest"))

    lines = run("group", "ls").lines()

    assert lines[0] == "Thresholds"
    assert lines[1].split() == ["QUEUE", "GROUP", "MAX_SIZE", "MAX_DELAY", "GRACE"]
    assert lines[2].split() == ["mail", "(queue", "default)", "50", "1m", "10s"]
    assert lines[3].split() == ["mail", "digest", "100", "1m30s", "10s"]
    assert lines[5] == "Aggregating now"
    assert lines[7].split()[:3] == ["mail", "digest", "2"]


def test_group_ls_json(broker):
    broker.set_group_config("mail", "digest", max_size=3)
    broker.enqueue(TaskSpec(type="d", queue="mail", group="digest"))

    data = run("group", "ls", "--json").json()

    assert data["configs"] == [{"queue": "mail", "group": "digest", "max_size": 3, "max_delay": 60.0, "grace": 10.0}]
    assert [(g["queue"], g["group"], g["count"]) for g in data["groups"]] == [("mail", "digest", 1)]


def test_group_rm(broker):
    broker.set_group_config("mail", "digest", max_size=3)

    assert (
        run("group", "rm", "mail", "--group", "digest").out.strip()
        == "removed the thresholds of queue mail, group digest"
    )
    assert broker.group_configs() == []
    assert (
        run("group", "rm", "mail", "--group", "digest").out.strip()
        == "queue mail, group digest had no thresholds of its own"
    )


def test_group_set_bad_duration_names_the_flag_and_changes_nothing(broker):
    assert (
        fails("group", "set", "mail", "--grace", "a while")
        == "--grace: invalid duration 'a while'; use e.g. 30s, 5m, 2h, 7d"
    )
    assert fails("group", "set", "mail", "--max-size", "0") == "--max-size: must be between 1 and 100000"
    assert broker.group_configs() == []
