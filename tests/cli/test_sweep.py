"""``conveyor sweep --once``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.broker import TaskSpec
from conveyor.models import Task
from tests.cli.support import run

pytestmark = pytest.mark.django_db(transaction=True)


def test_sweep_once_promotes_due_scheduled_tasks_and_reports_each_sweeper(broker):
    broker.enqueue(TaskSpec(type="later", id="t1", process_in=3600))
    # Let the hour pass: the CLI's broker reads the system clock.
    Task.objects.filter(id="t1").update(due_at=datetime.now(UTC) - timedelta(seconds=1))

    result = run("sweep", "--once", "--only", "scheduler")

    assert result.out.strip() == "scheduler: promoted=1 cron_fired=0"
    assert broker.get_task("t1").state == "pending"


def test_sweep_once_json_prints_one_object_per_sweeper():
    lines = run("--json", "sweep", "--once").lines()

    assert sorted(json.loads(line)["sweeper"] for line in lines) == ["bulk", "groups", "reaper", "rescuer", "scheduler"]
