"""What every dashboard view shares: staff access, read-only refusals, messages, redirects."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError
from conveyor.mount import prefix

READ_ONLY_MESSAGE = "The server is in read-only mode: nothing was changed."

View = Callable[..., HttpResponse]


def read_only() -> bool:
    return bool(conveyor_settings.READ_ONLY)


def history_url() -> str:
    """The throughput/backlog history endpoint, or "" while this server has none.

    Looked up by name rather than letting the page fetch a 404, which the
    browser would log as a console error on every page view.
    """
    try:
        return reverse("conveyor:stats-history")
    except NoReverseMatch:
        return ""


def events_url() -> str:
    """The live events WebSocket's path: under the prefix the API is mounted at."""
    return prefix() + "ws/events"


def page(request: HttpRequest, template: str, context: dict[str, Any], *, nav: str, status: int = 200) -> HttpResponse:
    """Render a dashboard page with the context the layout needs."""
    base = {"nav": nav, "read_only": read_only(), "history_url": history_url(), "events_url": events_url()}
    return render(request, template, {**base, **context}, status=status)


def staff(view: View) -> View:
    return staff_member_required(view)


def mutation(view: View) -> View:
    """A POST-only staff view that changes something; refused in read-only mode."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if read_only():
            return refuse_read_only(request)
        return view(request, *args, **kwargs)

    return staff_member_required(require_POST(wrapper))


def refuse_read_only(request: HttpRequest) -> HttpResponse:
    """403 with a page saying why; the API refuses the same way."""
    back = back_url(request, reverse("conveyor:dashboard:overview"))
    return page(
        request, "conveyor/dashboard/refused.html", {"message": READ_ONLY_MESSAGE, "back": back}, nav="", status=403
    )


def back_url(request: HttpRequest, default: str) -> str:
    """Where to go after an action: the form's ``next`` when it is local, else *default*."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def redirect_back(request: HttpRequest, default: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(back_url(request, default))


def report(request: HttpRequest, exc: ConveyorError, doing: str = "") -> None:
    """Show a broker error as a flash message (the broker's own words)."""
    text = exc.message
    messages.error(request, f"Could not {doing}: {text}" if doing else text)
