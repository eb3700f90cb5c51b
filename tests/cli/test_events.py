"""``conveyor events``: follow the live event stream."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from conveyor.broker import Broker, TaskSpec
from conveyor.notify.layer import ChannelLayerHooks
from conveyor_site.layers import redis_channel_layer
from tests.cli.support import fails, run
from tests.services import redis_problem

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def redis_layer():
    """A Redis channel layer with a prefix of its own, as a cluster has."""
    problem = redis_problem(REDIS_URL)
    if problem:
        pytest.skip(f"Redis tests skipped: {problem}")
    layers = {"default": redis_channel_layer(REDIS_URL, f"cli{uuid.uuid4().hex[:8]}")}
    with override_settings(CHANNEL_LAYERS=layers):
        yield


def follow(*args: str) -> tuple[threading.Thread, StringIO]:
    """Start ``conveyor events *args`` on a thread; its output collects in the buffer."""
    out = StringIO()
    thread = threading.Thread(
        target=call_command, args=("conveyor", *args), kwargs={"stdout": out, "stderr": StringIO()}
    )
    thread.start()
    return thread, out


def publish_until_done(thread: threading.Thread, tasks: list[TaskSpec], timeout: float = 20.0) -> list[str]:
    """Enqueue *tasks* (through the hooks a producer process uses) until the follower exits.

    The follower joins the group asynchronously, so early events may go
    unheard; keep producing rounds until it has seen what it waits for.
    """
    producer = Broker(hooks=ChannelLayerHooks())
    ids = []
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        for spec in tasks:
            ids.append(producer.enqueue(spec).id)
        thread.join(0.2)
    assert not thread.is_alive(), "the follower did not see its events in time"
    return ids


def test_events_follow_a_shared_layer_with_filters(redis_layer):
    thread, out = follow("events", "--queue", "mail", "--kind", "enqueued", "--count", "2", "--timeout", "30s")

    # Per round: one event that matches, one of another queue, one of another kind.
    mixed = [
        TaskSpec(type="send", queue="mail"),
        TaskSpec(type="send", queue="other"),
        TaskSpec(type="send", queue="mail", process_in=60),
    ]
    ids = publish_until_done(thread, mixed)

    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        stamp, kind, task_id, rest = line[:19], line[21:30], line[32:58], line[60:]
        assert time.strptime(stamp, "%Y-%m-%d %H:%M:%S")
        assert kind.strip() == "enqueued"
        assert task_id in ids
        assert rest == "queue=mail type=send state=pending attempt=1"


def test_events_json_prints_one_object_per_line(redis_layer):
    thread, out = follow("--json", "events", "--type", "report", "--count", "3", "--timeout", "30s")

    publish_until_done(thread, [TaskSpec(type="report", queue="q"), TaskSpec(type="other", queue="q")])

    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(events) == 3
    assert {(e["kind"], e["type"], e["queue"]) for e in events} == {("enqueued", "report", "q")}


def test_events_with_the_in_memory_layer_notes_it_and_listens_until_the_timeout():
    result = run("events", "--timeout", "0.3s")

    assert result.err.startswith("note: the channel layer is in-memory, so only this process's events can arrive")
    assert result.out == ""


def test_events_unknown_kind_or_bad_timeout_is_refused():
    assert fails("events", "--kind", "exploded").startswith("--kind: unknown event 'exploded' (one of enqueued,")
    assert fails("events", "--timeout", "forever") == "--timeout: invalid duration 'forever'; use e.g. 30s, 5m, 2h, 7d"
    assert fails("events", "--count", "0") == "--count: must be at least 1"
