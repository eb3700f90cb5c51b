"""Read-only mode (``CONVEYOR_READ_ONLY=1``) covers the CLI: every verb that changes something is refused.

Reads keep working, and so does enqueueing, as on the API (producers keep
producing in read-only mode).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.test import override_settings

from conveyor.broker import TaskSpec
from conveyor.broker.types import CronSpec, WebhookSpec
from tests.cli.support import run, run_failing

pytestmark = pytest.mark.django_db(transaction=True)

CHANGES = [
    ["queues", "pause", "q"],
    ["queues", "resume", "paused-q"],
    ["queues", "policy", "q", "lifo"],
    ["ratelimit", "set", "q", "--rate", "5"],
    ["ratelimit", "rm", "q"],
    ["concurrency", "set", "q", "--max", "2"],
    ["concurrency", "rm", "q"],
    ["group", "set", "q", "--max-size", "5"],
    ["group", "rm", "q"],
    ["cron", "add", "c2", "@daily", "t"],
    ["cron", "pause", "c1"],
    ["cron", "resume", "c1"],
    ["cron", "delete", "c1"],
    ["webhooks", "add", "h2", "https://hooks.example/2", "--queue", "q=1", "--secret", "s" * 20],
    ["webhooks", "pause", "h1"],
    ["webhooks", "resume", "h1"],
    ["webhooks", "delete", "h1"],
    ["tasks", "run", "t1"],
    ["tasks", "cancel", "t1"],
    ["tasks", "delete", "t1"],
    ["tasks", "archive", "t1"],
    ["tasks", "reschedule", "t1", "--process-in", "5m"],
]
READS = [
    ["stats"],
    ["tasks", "get", "t1"],
    ["tasks", "list"],
    ["cron", "list"],
    ["webhooks", "list"],
    ["ratelimit", "ls"],
    ["concurrency", "ls"],
    ["group", "ls"],
    ["cluster", "info"],
]
# Not run here: enqueue (below), events (a stream until Ctrl-C), sweep (a node's own work, as in read-only nodes).


@pytest.fixture
def state(broker: Any) -> None:
    broker.enqueue(TaskSpec(type="t", queue="q", id="t1", process_in=3600))
    broker.set_queue_paused("paused-q", True)
    broker.set_rate_limit("q", 10, 10)
    broker.set_concurrency_limit("q", 3)
    broker.set_group_config("q", "", max_size=50)
    broker.upsert_cron_entry(CronSpec(id="c1", spec="@hourly", task_type="t"))
    broker.upsert_webhook(WebhookSpec(name="h1", url="https://hooks.example/1", queues={"q": 1}, secrets=["s" * 20]))


def snapshot() -> dict[str, list[Any]]:
    """Every row of Conveyor's tables."""
    return {
        model._meta.label: sorted(json.dumps(row, default=str, sort_keys=True) for row in model.objects.values())
        for model in apps.get_app_config("conveyor").get_models()
    }


@pytest.mark.parametrize("args", CHANGES, ids=" ".join)
def test_read_only_mode_refuses_every_changing_verb_and_changes_nothing(state, args):
    before = snapshot()

    with override_settings(CONVEYOR={"READ_ONLY": True}):
        _, message = run_failing(*args)

    assert "read-only mode" in message and f"conveyor {args[0]} {args[1]}" in message
    assert snapshot() == before


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_read_only_mode_serves_every_reading_verb(state, args):
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        assert run(*args).out


def test_read_only_mode_still_enqueues(state, broker):
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        made = run("--json", "enqueue", "job", "--queue", "ro").json()

    assert broker.get_task(made["id"]).queue == "ro"
