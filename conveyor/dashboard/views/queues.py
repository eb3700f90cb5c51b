"""Queues: stats per queue, pause/resume, ordering policy, rate and concurrency limits, groups."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse

from conveyor.broker import Broker, get_broker
from conveyor.broker.queues import POLICIES
from conveyor.broker.validation import check_queue_name
from conveyor.dashboard.present import STATE_NAMES
from conveyor.dashboard.views.common import mutation, page, redirect_back, report, staff
from conveyor.durations import parse_duration
from conveyor.exceptions import ConveyorError, InvalidArgument
from conveyor.models import WorkerSession


def queue_rows(broker: Broker) -> list[dict[str, Any]]:
    """One dict per queue: stats, settings and limits."""
    rates = {r.queue: r for r in broker.rate_limits()}
    limits = {c.queue: c.limit for c in broker.concurrency_limits()}
    rows = []
    for q in broker.queue_stats():
        counts = dict(q.counts)
        rows.append(
            {
                "name": q.name,
                "paused": q.paused,
                "policy": q.policy,
                "counts": counts,
                "total": q.total,
                "waiting": counts.get("pending", 0) + counts.get("retry", 0),
                "oldest_due_at": q.oldest_due_at,
                "rate_limit": rates.get(q.name),
                "concurrency_limit": limits.get(q.name),
            }
        )
    return rows


@staff("queue")
def queues(request: HttpRequest) -> HttpResponse:
    broker = get_broker()
    return page(
        request,
        "conveyor/dashboard/queues.html",
        {"queues": queue_rows(broker), "states": STATE_NAMES, "group_configs": broker.group_configs()},
        nav="queues",
    )


def _name(name: str) -> str:
    try:
        return check_queue_name(name)
    except InvalidArgument:
        raise Http404("no such queue") from None


@staff("queue")
def queue_detail(request: HttpRequest, name: str) -> HttpResponse:
    name = _name(name)
    broker = get_broker()
    row = next((r for r in queue_rows(broker) if r["name"] == name), None)
    if row is None:
        # A queue with no tasks and no settings yet: show it empty so it can be configured.
        row = {
            "name": name, "paused": False, "policy": "fifo", "counts": dict.fromkeys(STATE_NAMES, 0), "total": 0,
            "waiting": 0, "oldest_due_at": None, "rate_limit": None, "concurrency_limit": None,
        }  # fmt: skip
    sessions = [s for s in WorkerSession.objects.order_by("connected_at") if name in (s.queues or {})]
    hooks = [r for r in broker.list_webhooks() if name in (r.queues or {})]
    return page(
        request,
        "conveyor/dashboard/queue_detail.html",
        {
            "q": row,
            "sessions": sessions,
            "hooks": hooks,
            "states": STATE_NAMES,
            "policies": POLICIES,
            "group_configs": [c for c in broker.group_configs() if c.queue == name],
            "groups": broker.group_stats(name),
        },
        nav="queues",
    )


def _detail(name: str) -> str:
    return reverse("conveyor:dashboard:queue", args=[name])


@mutation("queue")
def queue_pause(request: HttpRequest, name: str, action: str) -> HttpResponse:
    if action not in ("pause", "resume"):
        raise Http404("no such action")
    paused = action == "pause"
    try:
        get_broker().set_queue_paused(name, paused)
    except ConveyorError as exc:
        report(request, exc, f"{action} queue {name}")
    else:
        messages.success(
            request, f"Queue {name} {'paused: nothing more is dispatched from it' if paused else 'resumed'}."
        )
    return redirect_back(request, reverse("conveyor:dashboard:queues"))


@mutation("queue")
def queue_policy(request: HttpRequest, name: str) -> HttpResponse:
    policy = request.POST.get("policy", "")
    try:
        get_broker().set_queue_policy(name, policy)
    except ConveyorError as exc:
        report(request, exc, "set the ordering policy")
    else:
        messages.success(request, f"Queue {name} now leases in {policy} order.")
    return redirect_back(request, _detail(name))


def _number(value: str, field: str, kind: type) -> Any:
    text = (value or "").strip()
    if not text:
        raise InvalidArgument(field, "is required")
    try:
        return kind(text)
    except ValueError:
        raise InvalidArgument(field, f"must be {'a whole number' if kind is int else 'a number'}") from None


@mutation("queue")
def queue_rate_limit(request: HttpRequest, name: str) -> HttpResponse:
    broker = get_broker()
    try:
        if request.POST.get("op") == "remove":
            broker.delete_rate_limit(name)
            messages.success(request, f"Rate limit of queue {name} removed.")
        else:
            limit = broker.set_rate_limit(
                name,
                _number(request.POST.get("rate", ""), "rate", float),
                _number(request.POST.get("burst", "1"), "burst", int),
            )
            messages.success(request, f"Queue {name} limited to {limit.rate:g} tasks/s (burst {limit.burst}).")
    except ConveyorError as exc:
        report(request, exc, "set the rate limit")
    return redirect_back(request, _detail(name))


@mutation("queue")
def queue_concurrency_limit(request: HttpRequest, name: str) -> HttpResponse:
    broker = get_broker()
    try:
        if request.POST.get("op") == "remove":
            broker.delete_concurrency_limit(name)
            messages.success(request, f"Concurrency limit of queue {name} removed.")
        else:
            limit = broker.set_concurrency_limit(name, _number(request.POST.get("limit", ""), "limit", int))
            messages.success(request, f"Queue {name}: at most {limit.limit} active tasks per concurrency key.")
    except ConveyorError as exc:
        report(request, exc, "set the concurrency limit")
    return redirect_back(request, _detail(name))


def _seconds(value: str, field: str) -> float | None:
    text = (value or "").strip()
    if not text:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise InvalidArgument(field, str(exc)) from None


@mutation("group")
def queue_group_config(request: HttpRequest, name: str) -> HttpResponse:
    broker = get_broker()
    group = request.POST.get("group", "").strip()
    label = f"group {group}" if group else "the queue default"
    try:
        if request.POST.get("op") == "remove":
            broker.delete_group_config(name, group)
            messages.success(request, f"Group config for {label} of queue {name} removed.")
        else:
            size = request.POST.get("max_size", "").strip()
            cfg = broker.set_group_config(
                name,
                group,
                max_size=_number(size, "max_size", int) if size else None,
                max_delay=_seconds(request.POST.get("max_delay", ""), "max_delay"),
                grace=_seconds(request.POST.get("grace", ""), "grace"),
            )
            messages.success(
                request,
                f"Group config for {label} of queue {name}: max size {cfg.max_size}, "
                f"max delay {cfg.max_delay:g}s, grace {cfg.grace:g}s.",
            )
    except ConveyorError as exc:
        report(request, exc, "save the group config")
    return redirect_back(request, _detail(name))
