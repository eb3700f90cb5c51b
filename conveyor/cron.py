"""Cron specs: standard 5 fields, or 6 with *seconds first*, plus @descriptors.

``"*/15 * * * *"``   minute hour day-of-month month day-of-week
``"*/5 * * * * *"``  second minute hour day-of-month month day-of-week
``"@hourly"``        and the other croniter descriptors
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from conveyor.exceptions import InvalidArgument

# Where the "does it ever fire" search starts: a leap year's first day.
NEVER_CHECK_FROM = datetime(2024, 1, 1, tzinfo=UTC)


def check_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise InvalidArgument("timezone", f"unknown time zone {name!r}") from None


def check_spec(spec: str) -> str:
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgument("spec", "is required")
    spec = " ".join(spec.split())
    fields = spec.split(" ")
    if not spec.startswith("@") and len(fields) not in (5, 6):
        raise InvalidArgument("spec", "must have 5 fields (minute first) or 6 (seconds first)")
    if not croniter.is_valid(spec, second_at_beginning=len(fields) == 6):
        raise InvalidArgument("spec", f"invalid cron spec {spec!r}")
    try:
        # A valid spec may name no date at all (0 0 31 2 *: February 31st).
        croniter(spec, NEVER_CHECK_FROM, second_at_beginning=len(fields) == 6).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidArgument("spec", f"{spec!r} never fires: no date matches it") from None
    return spec


def next_fire(spec: str, timezone: str, after: datetime) -> datetime:
    """The first fire time strictly after *after*, as an aware UTC datetime."""
    spec = check_spec(spec)
    zone = check_timezone(timezone)
    seconds_first = len(spec.split(" ")) == 6
    it = croniter(spec, after.astimezone(zone), second_at_beginning=seconds_first)
    return it.get_next(datetime).astimezone(UTC)


def next_fires(spec: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        after = next_fire(spec, timezone, after)
        out.append(after)
    return out
