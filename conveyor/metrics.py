"""Prometheus metrics of a node, served at ``/metrics``.

Two kinds. The node's own: counters that follow the lifecycle events this
node saw (counted per batch, not per call, so the hot path pays one dict
update per event), its latency histograms, sessions and in-flight tasks,
and the process's CPU, memory, file descriptors and garbage collector.
The cluster's: tasks per queue and state, the due backlog and the age of
its oldest task, read from the database when Prometheus scrapes, so they
count every task whoever enqueued it (a web process, the CLI, another
node). No ``*_created`` series are exposed.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError
from conveyor.tokens import READ, authenticate, require_scope

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


class QueueCollector(Collector):
    """The cluster's queues as the database has them, read at scrape time."""

    def collect(self) -> Iterable[Metric]:
        from django.utils import timezone

        from conveyor.broker import get_broker

        pending = GaugeMetricFamily("conveyor_pending_tasks", "Due tasks waiting for a worker", labels=["queue"])
        tasks = GaugeMetricFamily(
            "conveyor_queue_tasks", "Tasks per queue and state (the whole cluster)", labels=["queue", "state"]
        )
        oldest = GaugeMetricFamily(
            "conveyor_queue_oldest_due_seconds", "How long the oldest due task has waited", labels=["queue"]
        )
        broker = get_broker()
        try:
            counts, stats = broker.pending_counts(), broker.queue_stats()
        except Exception:  # a scrape reports what it can; /readyz says why the database is down
            counts, stats = {}, []
        now = timezone.now()
        for queue, n in sorted(counts.items()):
            pending.add_metric([queue], n)
        for queue in stats:
            for state, n in sorted(queue.counts.items()):
                tasks.add_metric([queue.name, state], n)
            if queue.oldest_due_at is not None:
                oldest.add_metric([queue.name], max(0.0, (now - queue.oldest_due_at).total_seconds()))
        yield from (pending, tasks, oldest)

    def describe(self) -> Iterable[Metric]:
        return []  # collected at scrape time only, never at registration


REGISTRY.register(QueueCollector())
# The process's own: CPU, memory, open files (Linux), Python version, GC.
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)


class WithoutCreated(Collector):
    """*registry*'s families without their ``*_created`` samples.

    Counters and histograms carry a creation timestamp series that the text
    format exposes as a metric of its own; no dashboard reads them, and
    they double the series count. Filtered here rather than with
    ``prometheus_client.disable_created_metrics()``, which would change a
    host project's own metrics too.
    """

    def __init__(self, registry: Collector) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        for family in self.registry.collect():
            kept = Metric(family.name, family.documentation, family.type, family.unit)
            kept.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield kept


def refresh_node_gauges() -> None:
    from conveyor.dispatch.node import current_node

    node = current_node()
    if node is None:
        return
    SESSIONS.set(len(node.gateways))
    ACTIVE.set(sum(len(g.inflight) for g in node.gateways.values()))


def metrics_view(request: HttpRequest) -> HttpResponse:
    if conveyor_settings.METRICS_AUTH:
        # A scraper's token (Prometheus: ``authorization: {credentials: ...}``) with the read scope.
        try:
            require_scope(authenticate(request.headers.get("Authorization", "")), READ)
        except ConveyorError as exc:
            response = JsonResponse({"error": exc.code, "message": exc.message, **exc.details}, status=exc.http_status)
            if exc.http_status == 401:
                response["WWW-Authenticate"] = 'Bearer realm="conveyor"'
            return response
    refresh_node_gauges()
    return HttpResponse(generate_latest(WithoutCreated(REGISTRY)), content_type=CONTENT_TYPE_LATEST)
