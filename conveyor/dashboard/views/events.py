"""Live events: the events WebSocket as a filterable stream."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from conveyor.broker import get_broker
from conveyor.dashboard.views.common import page, staff
from conveyor.events import KINDS


@staff("task")
def events(request: HttpRequest) -> HttpResponse:
    return page(
        request,
        "conveyor/dashboard/events.html",
        {
            "kinds": KINDS,
            "queue_names": [q.name for q in get_broker().queue_stats()],
            "queue": request.GET.get("queue", ""),
            "type": request.GET.get("type", ""),
        },
        nav="events",
    )
