"""The operator dashboard (placeholder until the dashboard issue lands)."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from conveyor.broker import get_broker


@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/overview.html", {"queues": get_broker().queue_stats()})
