"""Limits: every queue's rate limit, concurrency limit and per-key concurrency usage in one table."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from conveyor.broker import get_broker
from conveyor.dashboard.views.common import page, staff

KEYS_SHOWN = 20


@staff("queue")
def limits(request: HttpRequest) -> HttpResponse:
    broker = get_broker()
    rates = {r.queue: r for r in broker.rate_limits()}
    caps = {c.queue: c.limit for c in broker.concurrency_limits()}
    usage = broker.key_usage(KEYS_SHOWN)
    rows: list[dict[str, Any]] = []
    for q in broker.queue_stats():
        cap = caps.get(q.name)
        keys = [{"key": k, "active": n, "load": min(100, round(100 * n / cap)) if cap else 0, "full": bool(cap and n >= cap)}
                for k, n in usage.get(q.name, [])]  # fmt: skip
        rows.append({"name": q.name, "paused": q.paused, "rate": rates.get(q.name), "cap": cap,
                     "active": q.counts.get("active", 0), "keys": keys})  # fmt: skip
    return page(
        request,
        "conveyor/dashboard/limits.html",
        {"rows": rows, "keys_shown": KEYS_SHOWN, "limited": sum(1 for r in rows if r["rate"] or r["cap"])},
        nav="limits",
    )
