"""Probes and Prometheus metrics (a node's own counters: see test_live_node.py)."""

from __future__ import annotations

import pytest
from channels.layers import channel_layers
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from conveyor import __version__
from conveyor_site.layers import redis_channel_layer
from tests.api.conftest import enqueue, ok

pytestmark = pytest.mark.django_db(transaction=True)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_healthz_says_ok_and_the_version(api):
    assert ok(api.client.get("/healthz")) == {"status": "ok", "version": __version__}


def test_readyz_checks_the_database_and_the_channel_layer(api):
    assert ok(api.client.get("/readyz")) == {"status": "ok", "checks": {"database": "ok", "channel_layer": "ok"}}


def test_readyz_is_503_naming_the_failing_check_when_the_channel_layer_is_down(api):
    unreachable = {"default": redis_channel_layer("redis://127.0.0.1:1/0")}
    with override_settings(CHANNEL_LAYERS=unreachable):
        channel_layers.backends.clear()
        try:
            response = api.client.get("/readyz")
        finally:
            channel_layers.backends.clear()
    body = ok(response, 503)
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["channel_layer"].startswith("error: ")


def test_metrics_are_prometheus_text_with_the_pending_gauge_per_queue(api, broker):
    for _ in range(2):
        enqueue(broker, queue="mail")
    enqueue(broker, queue="sms")
    enqueue(broker, queue="sms", process_in=600)  # not due: not pending
    response = api.client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    values = samples(response.content.decode())
    assert values[("conveyor_pending_tasks", (("queue", "mail"),))] == 2
    assert values[("conveyor_pending_tasks", (("queue", "sms"),))] == 1
    names = {name for name, _ in values}
    assert {"conveyor_active_tasks", "conveyor_worker_sessions"} <= names


def test_metrics_under_upstream_names(api, broker):
    from conveyor import metrics

    enqueue(broker, queue="mail")
    metrics.THROTTLED.labels("limited", "concurrency").inc(3)
    metrics.THROTTLED.labels("limited", "rate").inc()  # another limit: not counted there
    values = samples(api.client.get("/metrics").content.decode())
    assert values[("conveyor_pending", (("queue", "mail"),))] == 1  # from the database: the same on every node
    assert values[("conveyor_concurrency_throttled_total", (("queue", "limited"),))] == 3


def test_a_failing_sweeper_pass_is_counted_by_pass():
    import asyncio

    from asgiref.sync import async_to_sync

    from conveyor.broker import get_broker
    from conveyor.sweepers.base import Sweeper, SweeperLoop

    class Broken(Sweeper):
        name = "broken"
        interval_setting = "REAPER_INTERVAL"

        def run_once(self) -> dict[str, int]:
            raise RuntimeError("the database went away")

    before = _failures("broken")

    async def one_pass() -> None:
        loop = SweeperLoop(Broken(get_broker()))
        await loop.start()
        await asyncio.sleep(0.5)
        await loop.stop()

    async_to_sync(one_pass)()
    assert _failures("broken") == before + 1


def _failures(name: str) -> float:
    from conveyor import metrics

    for family in metrics.MAINTENANCE_FAILURES.collect():
        for s in family.samples:
            if s.name.endswith("_total") and s.labels == {"pass": name}:
                return s.value
    return 0.0


def test_metrics_count_every_task_of_the_cluster_per_queue_and_state(api, broker):
    # Stored straight through the broker (as a web process or another node
    # would): no event of this node's saw them, the database has them.
    for _ in range(3):
        enqueue(broker, queue="cluster-a")
    enqueue(broker, queue="cluster-a", process_in=600)
    values = samples(api.client.get("/metrics").content.decode())
    assert values[("conveyor_queue_tasks", (("queue", "cluster-a"), ("state", "pending")))] == 3
    assert values[("conveyor_queue_tasks", (("queue", "cluster-a"), ("state", "scheduled")))] == 1
    assert values[("conveyor_queue_tasks", (("queue", "cluster-a"), ("state", "completed")))] == 0
    assert values[("conveyor_queue_oldest_due_seconds", (("queue", "cluster-a"),))] >= 0


def test_metrics_carry_process_metrics_and_no_created_series(api, broker):
    from conveyor import metrics

    metrics.observe_dispatch("created", [0.01])  # a histogram child: it would carry a _created sample
    text = api.client.get("/metrics").content.decode()
    assert 'conveyor_queue_latency_seconds_count{queue="created"}' in text
    names = {name for name, _ in samples(text)}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"} <= names
    assert "python_gc_collections_total" in names
    assert not [line for line in text.splitlines() if "_created" in line.split(" ")[0].split("{")[0]], text
    assert "conveyor_tasks_enqueued_total" in text  # the counters themselves are still there
