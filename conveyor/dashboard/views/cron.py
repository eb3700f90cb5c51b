"""Cron: schedules with their next runs; add, edit, pause, resume, delete; spec preview."""

from __future__ import annotations

import json
from typing import Any
from zoneinfo import available_timezones

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.utils import timezone

from conveyor.broker import get_broker
from conveyor.broker.cron import CRON_OPTIONS
from conveyor.broker.types import CronSpec
from conveyor.cron import check_spec, check_timezone, next_fires
from conveyor.dashboard.views.common import mutation, page, read_only, redirect_back, refuse_read_only, report, staff
from conveyor.exceptions import ConveyorError, InvalidArgument, NotFound
from conveyor.models import CronEntry

FORM_FIELDS = ("id", "spec", "timezone", "task_type", "queue", "content_type", "payload", "options")
CONTENT_TYPES = ("application/json", "text/plain")
PREVIEW_COUNT = 5
COMMON_ZONES = (
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "Asia/Tokyo",
)


@staff("cron")
def cron_list(request: HttpRequest) -> HttpResponse:
    return page(request, "conveyor/dashboard/cron.html", {"entries": get_broker().list_cron_entries()}, nav="cron")


def preview(spec: str, tz: str) -> dict[str, Any]:
    """The next fire times of *spec* in *tz*, or the validation error."""
    try:
        normalized = check_spec(spec)
        zone = check_timezone(tz or "UTC")
        fires = next_fires(normalized, tz or "UTC", timezone.now(), PREVIEW_COUNT)
    except InvalidArgument as exc:
        return {"ok": False, "field": exc.field, "error": exc.message}
    return {
        "ok": True,
        "spec": normalized,
        "timezone": zone.key,
        "fires": [f.isoformat().replace("+00:00", "Z") for f in fires],
        # Wall-clock time in the entry's zone, which is what the spec describes.
        "local": [f.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z") for f in fires],
    }


@staff("cron")
def cron_preview(request: HttpRequest) -> JsonResponse:
    return JsonResponse(preview(request.GET.get("spec", ""), request.GET.get("timezone", "UTC")))


def _initial(entry: CronEntry | None) -> dict[str, Any]:
    if entry is None:
        return {"timezone": "UTC", "queue": "default", "content_type": "application/json", "payload": "", "options": ""}
    raw = bytes(entry.payload or b"")
    if "json" in entry.content_type and raw:
        try:
            payload = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        except (ValueError, UnicodeDecodeError):
            payload = raw.decode("utf-8", "replace")
    else:
        payload = raw.decode("utf-8", "replace")
    return {
        "id": entry.id,
        "spec": entry.spec,
        "timezone": entry.timezone,
        "task_type": entry.task_type,
        "queue": entry.queue,
        "content_type": entry.content_type,
        "payload": payload,
        "options": json.dumps(entry.options, indent=2) if entry.options else "",
        "paused": entry.paused,
    }


def _spec_from(values: dict[str, Any], entry_id: str) -> CronSpec:
    content_type = values["content_type"] or "application/json"
    text = values["payload"]
    if "json" in content_type:
        if text.strip():
            try:
                payload = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode()
            except ValueError as exc:
                raise InvalidArgument("payload", f"is not valid JSON ({exc})") from None
        else:
            payload = b""
    else:
        payload = text.encode()
    options: Any = {}
    if values["options"].strip():
        try:
            options = json.loads(values["options"])
        except ValueError as exc:
            raise InvalidArgument("options", f"is not valid JSON ({exc})") from None
        if not isinstance(options, dict):
            raise InvalidArgument("options", "must be a JSON object")
    return CronSpec(
        id=entry_id,
        spec=values["spec"],
        task_type=values["task_type"],
        queue=values["queue"] or "default",
        payload=payload,
        content_type=content_type,
        timezone=values["timezone"] or "UTC",
        options=options,
        paused=values["paused"],
    )


def _field_of(exc: InvalidArgument) -> str:
    field = (exc.field or "").split(".")[0].split("[")[0]
    if field in FORM_FIELDS:
        return field
    if field in CRON_OPTIONS or field in ("unique_key", "unique"):
        return "options"
    if field == "type":
        return "task_type"
    return ""


@staff("cron", post="change")
def cron_form(request: HttpRequest, entry_id: str | None = None) -> HttpResponse:
    broker = get_broker()
    entry = None
    if entry_id is not None:
        try:
            entry = broker.get_cron_entry(entry_id)
        except NotFound:
            messages.error(request, f"Cron entry {entry_id} no longer exists.")
            return HttpResponseRedirect(reverse("conveyor:dashboard:cron"))
    values = _initial(entry)
    errors: dict[str, str] = {}
    if entry is not None and entry.seal_error and request.method != "POST":
        errors["payload"] = f"The stored payload cannot be shown: {entry.seal_error}. Saving replaces it with this one."
    if request.method == "POST":
        if read_only():
            return refuse_read_only(request)
        values = {
            name: request.POST.get(name, "").strip() if name != "payload" else request.POST.get(name, "")
            for name in FORM_FIELDS
        }
        values["paused"] = request.POST.get("paused") == "on"
        new_id = entry.id if entry is not None else values["id"]
        try:
            if entry is None and new_id and _exists(new_id):
                raise InvalidArgument("id", f"an entry named {new_id!r} exists already; edit it instead")
            saved = broker.upsert_cron_entry(_spec_from(values, new_id))
        except InvalidArgument as exc:
            field = _field_of(exc)
            errors[field or "general"] = exc.reason if field else exc.message
        except ConveyorError as exc:
            errors["general"] = exc.message
        else:
            messages.success(
                request, f"Cron entry {saved.id} saved; next run {saved.next_run_at:%Y-%m-%d %H:%M:%S} UTC."
            )
            return HttpResponseRedirect(reverse("conveyor:dashboard:cron"))
    first = preview(values.get("spec", ""), values.get("timezone", "UTC")) if values.get("spec") else None
    if first and first["ok"]:
        first["pairs"] = list(zip(first["fires"], first["local"], strict=True))
    return page(
        request,
        "conveyor/dashboard/cron_form.html",
        {
            "entry": entry,
            "v": values,
            "errors": errors,
            "preview": first,
            "content_types": CONTENT_TYPES,
            "zones": sorted(available_timezones()),
            "common_zones": COMMON_ZONES,
            "cron_options": CRON_OPTIONS,
        },
        nav="cron",
    )


def _exists(entry_id: str) -> bool:
    try:
        get_broker().get_cron_entry(entry_id)
    except NotFound:
        return False
    return True


@mutation("cron")
def cron_action(request: HttpRequest, entry_id: str, action: str) -> HttpResponse:
    broker = get_broker()
    try:
        if action in ("pause", "resume"):
            entry = broker.set_cron_paused(entry_id, action == "pause")
            messages.success(request, f"Cron entry {entry_id} {'paused' if entry.paused else 'resumed'}.")
        elif action == "delete":
            broker.delete_cron_entry(entry_id)
            messages.success(request, f"Cron entry {entry_id} deleted.")
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except ConveyorError as exc:
        report(request, exc, f"{action} cron entry {entry_id}")
    return redirect_back(request, reverse("conveyor:dashboard:cron"))
