"""Overview: totals per state, throughput and backlog, nodes, sessions, sweeper leaders."""

from __future__ import annotations

from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from conveyor.broker import get_broker
from conveyor.dashboard.present import STATE_NAMES, SWEEPERS
from conveyor.dashboard.views.common import page, staff
from conveyor.dashboard.views.queues import queue_rows
from conveyor.models import Node, WorkerSession

SESSIONS_SHOWN = 6  # per node on the overview; the workers page lists them all


@staff("task")
def overview(request: HttpRequest) -> HttpResponse:
    broker = get_broker()
    rows = queue_rows(broker)
    totals = {name: sum(r["counts"].get(name, 0) for r in rows) for name in STATE_NAMES}
    nodes = list(
        Node.objects.order_by("started_at").annotate(
            session_count=Count("sessions"), inflight=Sum("sessions__inflight")
        )
    )
    leaders = [(name, [n for n in nodes if name in (n.leader_of or [])]) for name in SWEEPERS]
    shown: dict[str, list[WorkerSession]] = {}
    for s in WorkerSession.objects.order_by("connected_at").only(
        "id", "node_id", "queues", "labels", "inflight", "concurrency"
    ):
        per_node = shown.setdefault(s.node_id, [])
        if len(per_node) < SESSIONS_SHOWN:
            per_node.append(s)
    for n in nodes:
        n.shown_sessions = shown.get(n.id, [])
        n.more_sessions = max(0, n.session_count - len(n.shown_sessions))
    sessions = WorkerSession.objects.aggregate(
        count=Count("id"), concurrency=Sum("concurrency"), inflight=Sum("inflight")
    )
    return page(
        request,
        "conveyor/dashboard/overview.html",
        {
            "queues": rows,
            "totals": totals,
            "total": sum(totals.values()),
            "waiting": totals["pending"]
            + totals["scheduled"]
            + totals["retry"]
            + totals["blocked"]
            + totals["aggregating"],
            "nodes": nodes,
            "leaders": leaders,
            "sessions": sessions,
            "now": timezone.now(),
        },
        nav="overview",
    )
