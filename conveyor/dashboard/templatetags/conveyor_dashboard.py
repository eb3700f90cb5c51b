"""Filters for dashboard templates: times, durations, states, sizes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html

from conveyor.dashboard import present

register = template.Library()


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@register.filter
def when(value: datetime | None, empty: str = "—") -> str:
    """A timestamp as relative text ("5m ago") that the page keeps current; UTC in the tooltip."""
    if value is None:
        return format_html('<span class="muted">{}</span>', empty)
    iso = _iso(value)
    return format_html(
        '<time datetime="{}" title="{}" data-rel>{}</time>',
        iso,
        iso.replace("T", " "),
        present.relative(value, timezone.now()),
    )


@register.filter
def stamp(value: datetime | None) -> str:
    """An absolute UTC timestamp with the relative time after it."""
    if value is None:
        return format_html('<span class="muted">{}</span>', "—")
    iso = _iso(value)
    return format_html(
        '<span class="stamp">{}</span> <time class="muted" datetime="{}" data-rel>{}</time>',
        iso.replace("T", " "),
        iso,
        present.relative(value, timezone.now()),
    )


@register.filter
def age(value: datetime | None) -> str:
    """How long ago *value* was, as a duration that keeps ticking (queue latency)."""
    if value is None:
        return format_html('<span class="muted">{}</span>', "—")
    seconds = max(0.0, (timezone.now() - value).total_seconds())
    return format_html('<time datetime="{}" data-age>{}</time>', _iso(value), present.span(seconds))


@register.filter
def span(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return present.span(seconds)


@register.filter
def size(n: int | None) -> str:
    return present.human_size(int(n or 0))


# An attempt's outcome -> the badge colour of the state or event it is like.
ATTEMPT_TONES = {
    "completed": "s-completed",
    "retry": "s-retry",
    "failed": "s-archived",
    "released": "k-released",
    "crashed": "warn",
    "lease-expired": "warn",
}


@register.filter
def attempt_badge(outcome: str) -> str:
    return format_html('<span class="badge {}">{}</span>', ATTEMPT_TONES.get(outcome, ""), outcome)


@register.filter
def took(attempt: Any) -> str:
    """How long an attempt ran, from its start to its outcome (ms under a second)."""
    if attempt.started_at is None:
        return "—"
    seconds = max(0.0, (attempt.finished_at - attempt.started_at).total_seconds())
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    return f"{seconds:.1f} s" if seconds < 60 else present.span(seconds)


@register.filter
def first_line(text: str) -> str:
    return (text or "").strip().split("\n", 1)[0]


@register.filter
def state_badge(state: str) -> str:
    return format_html('<span class="badge s-{}">{}</span>', state, state)


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None
