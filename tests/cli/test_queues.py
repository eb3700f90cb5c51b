"""``conveyor stats`` and ``conveyor queues pause|resume|policy``."""

from __future__ import annotations

import pytest

from conveyor.broker import TaskSpec
from tests.cli.support import fails, run, table

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = ["QUEUE", "PAUSED", "POLICY", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "AGGREGATING", "BLOCKED",
          "COMPLETED", "ARCHIVED", "CANCELED", "TOTAL"]  # fmt: skip


def test_stats_counts_tasks_per_state_for_every_queue(broker):
    broker.enqueue(TaskSpec(type="a", queue="mail"))
    broker.enqueue(TaskSpec(type="a", queue="mail", process_in=60))
    broker.enqueue(TaskSpec(type="a", queue="reports"))
    broker.set_queue_paused("idle", True)

    rows = table(run("stats"))

    assert rows[0] == HEADER
    assert rows[1] == ["idle", "yes", "fifo", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0"]
    assert rows[2] == ["mail", "no", "fifo", "1", "0", "1", "0", "0", "0", "0", "0", "0", "2"]
    assert rows[3] == ["reports", "no", "fifo", "1", "0", "0", "0", "0", "0", "0", "0", "0", "1"]


def test_stats_table_columns_are_aligned(broker):
    broker.enqueue(TaskSpec(type="a", queue="a-much-longer-queue-name"))
    broker.enqueue(TaskSpec(type="a", queue="q"))

    lines = run("stats").lines()

    starts = {line.index(" no ") for line in lines[1:]}
    assert len(starts) == 1, lines


def test_stats_json(broker):
    broker.enqueue(TaskSpec(type="a", queue="mail"))

    data = run("--json", "stats").json()

    assert data["queues"][0]["name"] == "mail"
    assert data["queues"][0]["counts"]["pending"] == 1
    assert data["queues"][0]["total"] == 1


def test_queues_pause_and_resume(broker):
    assert run("queues", "pause", "mail").out.strip() == "paused queue mail"
    assert broker.queue_paused("mail")

    assert run("queues", "resume", "mail", "--json").json() == {"queue": "mail", "paused": False}
    assert not broker.queue_paused("mail")


def test_queues_pause_invalid_name_fails():
    assert fails("queues", "pause", "no spaces").startswith("queue: must match")


def test_queues_policy_sets_the_order(broker):
    assert run("queues", "policy", "mail", "lifo").out.strip() == "queue mail now dispatches lifo"
    assert broker.queue_policy("mail") == "lifo"


def test_queues_policy_unknown_is_refused(broker):
    assert fails("queues", "policy", "mail", "newest") == "policy: must be one of fifo, lifo, random"
    assert broker.queue_policy("mail") == "fifo"
