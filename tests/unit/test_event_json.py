"""Events as JSON: the times of a batch are written once, the same as each event alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from conveyor.events import Event, as_dicts


def _event(task_id: str, at: datetime) -> Event:
    return Event(kind="enqueued", task_id=task_id, queue="q", type="t", state="pending", attempt=1, at=at)


def test_as_dicts_is_as_dict_of_each_event_shared_times_or_not() -> None:
    now = datetime(2026, 11, 30, 20, 0, 0, 123456, tzinfo=UTC)
    events = [
        _event("a", now),
        _event("b", now),
        _event("c", now + timedelta(seconds=1)),
        _event("d", now.astimezone(timezone(timedelta(hours=2)))),  # the same instant, another offset
    ]
    assert as_dicts(events) == [e.as_dict() for e in events]
    assert [d["at"] for d in as_dicts(events)] == [
        "2026-11-30T20:00:00.123456Z",
        "2026-11-30T20:00:00.123456Z",
        "2026-11-30T20:00:01.123456Z",
        "2026-11-30T22:00:00.123456+02:00",
    ]
