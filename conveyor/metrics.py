"""Prometheus metrics of a node, served at ``/metrics``.

Counters follow lifecycle events (counted per batch, not per call), so the
hot path pays one dict update per event. Pending counts per queue are read
from the database when Prometheus scrapes.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

REGISTRY = CollectorRegistry(auto_describe=True)

_EVENT_COUNTERS = {
    "enqueued": Counter("conveyor_tasks_enqueued_total", "Tasks enqueued", ["queue"], registry=REGISTRY),
    "leased": Counter(
        "conveyor_tasks_dispatched_total", "Tasks leased and pushed to a worker", ["queue"], registry=REGISTRY
    ),
    "completed": Counter("conveyor_tasks_completed_total", "Tasks completed", ["queue"], registry=REGISTRY),
    "retried": Counter(
        "conveyor_tasks_retried_total", "Failed attempts that will be retried", ["queue"], registry=REGISTRY
    ),
    "archived": Counter(
        "conveyor_tasks_archived_total", "Tasks dead-lettered (archived)", ["queue"], registry=REGISTRY
    ),
    "released": Counter(
        "conveyor_tasks_released_total", "Tasks given back without a retry spent", ["queue"], registry=REGISTRY
    ),
    "canceled": Counter("conveyor_tasks_canceled_total", "Waiting tasks canceled", ["queue"], registry=REGISTRY),
}
FAILED = Counter("conveyor_tasks_failed_total", "Failed attempts (retried or archived)", ["queue"], registry=REGISTRY)
LEASE_QUERIES = Counter(
    "conveyor_lease_queries_total", "Lease transactions run by this node's dispatchers", ["queue"], registry=REGISTRY
)
THROTTLED = Counter(
    "conveyor_throttled_total", "Lease cycles held back by a queue limit", ["queue", "limit"], registry=REGISTRY
)
MAINTENANCE_FAILURES = Counter(
    "conveyor_maintenance_failures_total", "Sweeper passes that failed (retried next tick)", ["pass"], registry=REGISTRY
)


class UpstreamNames:
    """Series under the names upstream Conveyor's dashboards and autoscalers read:
    ``conveyor_pending`` (the due backlog per queue, from the database, so the
    same on every node) and ``conveyor_concurrency_throttled_total`` (this
    node's ``conveyor_throttled_total{limit="concurrency"}``)."""

    def collect(self) -> Iterable[Any]:
        from conveyor.broker import get_broker

        throttled = CounterMetricFamily(
            "conveyor_concurrency_throttled", "Lease cycles held back by a per-key concurrency limit", labels=["queue"]
        )
        for family in THROTTLED.collect():
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels.get("limit") == "concurrency":
                    throttled.add_metric([sample.labels["queue"]], sample.value)
        pending = GaugeMetricFamily(
            "conveyor_pending", "Due tasks waiting for a worker (the cluster)", labels=["queue"]
        )
        try:
            counts = get_broker().pending_counts()
        except Exception:  # a scrape reports what it can; /readyz says why the database is down
            counts = {}
        for queue, n in sorted(counts.items()):
            pending.add_metric([queue], n)
        yield from (throttled, pending)

    def describe(self) -> Iterable[Any]:
        return []  # collected at scrape time only


REGISTRY.register(UpstreamNames())  # type: ignore[arg-type]
WEBHOOK_DELIVERIES = Counter(
    "conveyor_webhook_deliveries_total", "Webhook deliveries by outcome", ["webhook", "outcome"], registry=REGISTRY
)
QUEUE_LATENCY = Histogram(
    "conveyor_queue_latency_seconds",
    "Time from due to dispatch",
    ["queue"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
PROCESS_DURATION = Histogram(
    "conveyor_process_duration_seconds",
    "Time from dispatch to the worker's result",
    ["queue", "type"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
    registry=REGISTRY,
)
ACTIVE = Gauge("conveyor_active_tasks", "Tasks in flight on this node's gateways", registry=REGISTRY)
SESSIONS = Gauge("conveyor_worker_sessions", "Worker sessions connected to this node", registry=REGISTRY)


def count_events(events: Sequence[Any]) -> None:
    """EventBus listener: bump the lifecycle counters, one inc per (kind, queue)."""
    tally = Tally((e.kind, e.queue) for e in events)
    for (kind, queue), n in tally.items():
        counter = _EVENT_COUNTERS.get(kind)
        if counter is not None:
            counter.labels(queue).inc(n)
        if kind in ("retried", "archived"):
            FAILED.labels(queue).inc(n)


def observe_dispatch(queue: str, waits: Iterable[float]) -> None:
    histogram = QUEUE_LATENCY.labels(queue)
    for wait in waits:
        histogram.observe(max(0.0, wait))


class PendingCollector:
    """Due pending + retry tasks per queue, read at scrape time."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        from conveyor.broker import get_broker

        family = GaugeMetricFamily("conveyor_pending_tasks", "Due tasks waiting for a worker", labels=["queue"])
        try:
            counts = get_broker().pending_counts()
        except Exception:
            counts = {}
        for queue, n in sorted(counts.items()):
            family.add_metric([queue], n)
        yield family

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []


REGISTRY.register(PendingCollector())  # type: ignore[arg-type]


def refresh_node_gauges() -> None:
    from conveyor.dispatch.node import current_node

    node = current_node()
    if node is None:
        return
    SESSIONS.set(len(node.gateways))
    ACTIVE.set(sum(len(g.inflight) for g in node.gateways.values()))


def metrics_view(request: HttpRequest) -> HttpResponse:
    refresh_node_gauges()
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
