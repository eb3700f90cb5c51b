"""Workers: live sessions on every node."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from conveyor.dashboard.views.common import page, staff
from conveyor.models import Node, WorkerSession


@staff("worker")
def workers(request: HttpRequest) -> HttpResponse:
    sessions = list(WorkerSession.objects.select_related("node").order_by("connected_at"))
    for s in sessions:
        s.queue_list = sorted((s.queues or {}).items())
        s.load = round(100 * s.inflight / s.concurrency) if s.concurrency else 0
    return page(
        request,
        "conveyor/dashboard/workers.html",
        {
            "sessions": sessions,
            "node_count": Node.objects.count(),
            "concurrency": sum(s.concurrency for s in sessions),
            "inflight": sum(s.inflight for s in sessions),
        },
        nav="workers",
    )
