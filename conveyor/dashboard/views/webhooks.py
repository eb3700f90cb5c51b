"""Webhooks: registrations with live status; add, edit, pause, resume, delete. Secrets are write-only."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from conveyor.broker import get_broker
from conveyor.broker.types import WebhookSpec
from conveyor.dashboard.views.common import mutation, page, read_only, redirect_back, refuse_read_only, report, staff
from conveyor.durations import parse_duration
from conveyor.exceptions import ConveyorError, InvalidArgument, NotFound
from conveyor.models import WebhookRegistration, WebhookStatus

FORM_FIELDS = ("name", "url", "queues", "concurrency", "request_timeout", "batch_types", "secrets")
RECENT_SHOWN = 20
# Delivery outcomes the webhook gateway records (newest first): accepted means
# the endpoint took the task and answers later through a callback.
OK_OUTCOMES = ("success", "accepted", "ok", "completed", "delivered")
NEUTRAL_OUTCOMES = ("released",)


def outcome(item: Any) -> dict[str, Any]:
    """One recent delivery, whatever its recorded shape: ok flag, label and tooltip."""
    if not isinstance(item, dict):
        return {"ok": None, "label": str(item), "title": str(item)}
    ok = item.get("ok")
    status = item.get("status") or item.get("status_code") or item.get("code")
    if ok is None and isinstance(status, int):
        ok = 200 <= status < 300
    outcome_text = str(item.get("outcome") or "").lower()
    if ok is None and outcome_text in NEUTRAL_OUTCOMES:
        return {"ok": None, "label": outcome_text, "title": _title(item)}
    if ok is None and outcome_text:
        ok = outcome_text in OK_OUTCOMES
    return {"ok": ok, "label": str(status or item.get("outcome") or ("ok" if ok else "error")), "title": _title(item)}


def _title(item: dict[str, Any]) -> str:
    parts = [str(item[k]) for k in ("at", "task_id", "outcome", "status", "error") if item.get(k) not in (None, "")]
    return " · ".join(parts) or str(item)


@staff("webhook")
def webhooks(request: HttpRequest) -> HttpResponse:
    regs = get_broker().list_webhooks()
    statuses = {s.name: s for s in WebhookStatus.objects.filter(name__in=[r.name for r in regs])}
    rows = []
    for reg in regs:
        status = statuses.get(reg.name)
        # Stored newest first; shown oldest to newest, left to right.
        recent = [outcome(i) for i in reversed((status.recent or [])[:RECENT_SHOWN])] if status is not None else []
        rows.append(
            {
                "reg": reg,
                "queues": sorted((reg.queues or {}).items()),
                "secret_count": len(reg.secrets or []),
                "status": status,
                "recent": recent,
                "recent_ok": sum(1 for r in recent if r["ok"]),
            }
        )
    return page(request, "conveyor/dashboard/webhooks.html", {"rows": rows}, nav="webhooks")


def parse_queues(text: str) -> dict[str, int]:
    """``"emails=2, reports"`` -> ``{"emails": 2, "reports": 1}``."""
    queues: dict[str, int] = {}
    for part in re.split(r"[,\n]", text or ""):
        part = part.strip()
        if not part:
            continue
        name, _, weight = part.partition("=")
        name, weight = name.strip(), weight.strip()
        try:
            queues[name] = int(weight) if weight else 1
        except ValueError:
            raise InvalidArgument("queues", f"weight of {name!r} must be a whole number (write queue=weight)") from None
    return queues


def _initial(reg: WebhookRegistration | None) -> dict[str, Any]:
    if reg is None:
        return {"concurrency": "10", "queues": "", "batch_types": "", "request_timeout": "", "paused": False}
    return {
        "name": reg.name,
        "url": reg.url,
        "queues": ", ".join(f"{q}={w}" for q, w in sorted((reg.queues or {}).items())),
        "concurrency": str(reg.concurrency),
        "request_timeout": f"{reg.request_timeout:g}s" if reg.request_timeout is not None else "",
        "batch_types": ", ".join(reg.batch_types or []),
        "paused": reg.paused,
    }


def _secrets(request: HttpRequest, reg: WebhookRegistration | None) -> list[str]:
    existing = list(reg.secrets or []) if reg is not None else []
    new = request.POST.get("new_secret", "")
    if request.POST.get("clear_secrets") == "on":
        existing = []
    if new:
        return [new, *existing[:1]] if request.POST.get("keep_previous") == "on" else [new]
    return existing


def _spec(request: HttpRequest, reg: WebhookRegistration | None, values: dict[str, Any]) -> WebhookSpec:
    try:
        concurrency: Any = int(values["concurrency"]) if values["concurrency"] else 10
    except ValueError:
        raise InvalidArgument("concurrency", "must be a whole number") from None
    timeout = None
    if values["request_timeout"]:
        try:
            timeout = parse_duration(values["request_timeout"])
        except ValueError as exc:
            raise InvalidArgument("request_timeout", str(exc)) from None
    return WebhookSpec(
        name=reg.name if reg is not None else values["name"],
        url=values["url"],
        queues=parse_queues(values["queues"]),
        concurrency=concurrency,
        secrets=_secrets(request, reg),
        batch_types=[t.strip() for t in values["batch_types"].split(",") if t.strip()],
        request_timeout=timeout,
        paused=values["paused"],
    )


def _field_of(exc: InvalidArgument) -> str:
    field = (exc.field or "").split(".")[0].split("[")[0]
    return field if field in FORM_FIELDS else ""


@staff("webhook", post="change")
def webhook_form(request: HttpRequest, name: str | None = None) -> HttpResponse:
    broker = get_broker()
    reg = None
    if name is not None:
        try:
            reg = broker.get_webhook(name)
        except NotFound:
            messages.error(request, f"Webhook registration {name} no longer exists.")
            return HttpResponseRedirect(reverse("conveyor:dashboard:webhooks"))
    values = _initial(reg)
    errors: dict[str, str] = {}
    if request.method == "POST":
        if read_only():
            return refuse_read_only(request)
        values = {
            f: request.POST.get(f, "").strip()
            for f in ("name", "url", "queues", "concurrency", "request_timeout", "batch_types")
        }
        values["paused"] = request.POST.get("paused") == "on"
        try:
            if reg is None and values["name"] and _exists(values["name"]):
                raise InvalidArgument(
                    "name", f"a registration named {values['name']!r} exists already; edit it instead"
                )
            saved = broker.upsert_webhook(_spec(request, reg, values))
        except InvalidArgument as exc:
            field = _field_of(exc)
            errors[field or "general"] = exc.reason if field else exc.message
        except ConveyorError as exc:
            errors["general"] = exc.message
        else:
            messages.success(request, f"Webhook registration {saved.name} saved.")
            return HttpResponseRedirect(reverse("conveyor:dashboard:webhooks"))
    return page(
        request,
        "conveyor/dashboard/webhook_form.html",
        {"reg": reg, "v": values, "errors": errors, "secret_count": len(reg.secrets or []) if reg is not None else 0},
        nav="webhooks",
    )


def _exists(name: str) -> bool:
    try:
        get_broker().get_webhook(name)
    except NotFound:
        return False
    return True


@mutation("webhook")
def webhook_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    broker = get_broker()
    try:
        if action in ("pause", "resume"):
            reg = broker.set_webhook_paused(name, action == "pause")
            messages.success(request, f"Webhook registration {name} {'paused' if reg.paused else 'resumed'}.")
        elif action == "delete":
            broker.delete_webhook(name)
            messages.success(request, f"Webhook registration {name} deleted.")
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except ConveyorError as exc:
        report(request, exc, f"{action} webhook {name}")
    return redirect_back(request, reverse("conveyor:dashboard:webhooks"))
