"""What every dashboard view shares: staff access, read-only refusals, unstorable input, messages, redirects."""

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

from conveyor.broker.validation import check_storable, text_problem
from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError, InvalidArgument
from conveyor.mount import prefix
from conveyor.permissions import missing_permission, refusal

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


# What each page shows: its controls need the change permission of this (conveyor.permissions).
PAGE_RESOURCES = {"overview": "task", "tasks": "task", "events": "task", "queues": "queue", "workers": "worker",
                  "cron": "cron", "webhooks": "webhook"}  # fmt: skip

Action = str | Callable[[HttpRequest, dict[str, Any]], str]


def page(request: HttpRequest, template: str, context: dict[str, Any], *, nav: str, status: int = 200) -> HttpResponse:
    """Render a dashboard page with the context the layout needs.

    ``locked`` disables the controls: in read-only mode, or when the user
    lacks the change permission of what the page shows (``cannot_change``
    names it).
    """
    resource = PAGE_RESOURCES.get(nav)
    cannot = missing_permission(request.user, "change", resource) if resource else None
    base = {
        "nav": nav,
        "read_only": read_only(),
        "locked": read_only() or cannot is not None,
        "cannot_change": cannot,
        "history_url": history_url(),
        "events_url": events_url(),
    }
    return render(request, template, {**base, **context}, status=status)


def staff(resource: str, *, post: str | None = None) -> Callable[[View], View]:
    """A staff page that needs ``view`` on *resource*; with *post*, a POST to it needs that action too."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            needed = missing_permission(request.user, "view", resource)
            if needed is None and post is not None and request.method == "POST":
                needed = missing_permission(request.user, post, resource)
            if needed is not None:
                return refuse_permission(request, needed)
            return refuse_unstorable(request, kwargs) or view(request, *args, **kwargs)

        return staff_member_required(wrapper)

    return decorate


def mutation(resource: str, action: Action = "change") -> Callable[[View], View]:
    """A POST-only staff view that changes *resource*: refused in read-only mode
    and without the *action* permission (a callable of the request and the
    URL's arguments picks it per call)."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if read_only():
                return refuse_read_only(request)
            name = action(request, kwargs) if callable(action) else action
            needed = missing_permission(request.user, name, resource)
            if needed is not None:
                return refuse_permission(request, needed)
            return refuse_unstorable(request, kwargs) or view(request, *args, **kwargs)

        return staff_member_required(require_POST(wrapper))

    return decorate


def refused(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """The page of a refused request: *message* and a way back."""
    back = back_url(request, reverse("conveyor:dashboard:overview"))
    return page(request, "conveyor/dashboard/refused.html", {"message": message, "back": back}, nav="", status=status)


def refuse_permission(request: HttpRequest, needed: str) -> HttpResponse:
    """403 with a page naming the permission, as the admin refuses a user without it."""
    return refused(request, f"Refused: {refusal(request.user, needed)}.", 403)


def refuse_unstorable(request: HttpRequest, kwargs: dict[str, Any]) -> HttpResponse | None:
    """400 with a page naming the first id in the path or posted field that no text column can hold, else None.

    Ids and form fields go to the database as they are, and PostgreSQL
    refuses NUL in text (a lone surrogate has no UTF-8 at all): the REST API
    answers these 400 naming the field too. Query parameters are the pages'
    filters, which the broker checks and the page shows as its own error.
    """
    try:
        for name, value in kwargs.items():
            check_storable(value, name)
        for name, values in request.POST.lists():
            for value in values:
                check_storable(value, name)
    except InvalidArgument as exc:
        return refused(request, f"Refused: {exc.message}. Nothing was changed.", 400)
    return None


def refuse_read_only(request: HttpRequest) -> HttpResponse:
    """403 with a page saying why; the API refuses the same way."""
    return refused(request, READ_ONLY_MESSAGE, 403)


def back_url(request: HttpRequest, default: str) -> str:
    """Where to go after an action: the form's ``next`` when it is local (and holds no NUL), else *default*."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if (
        target
        and text_problem(target) is None
        and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
    ):
        return target
    return default


def redirect_back(request: HttpRequest, default: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(back_url(request, default))


def report(request: HttpRequest, exc: ConveyorError, doing: str = "") -> None:
    """Show a broker error as a flash message (the broker's own words)."""
    text = exc.message
    messages.error(request, f"Could not {doing}: {text}" if doing else text)
