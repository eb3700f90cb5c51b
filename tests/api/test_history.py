"""GET /api/v1/stats/history: per-minute counts for the dashboard charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from conveyor import stats
from conveyor.events import Event

pytestmark = pytest.mark.django_db(transaction=True)


def event(kind: str, queue: str, at: datetime) -> Event:
    return Event(kind=kind, task_id="t", queue=queue, type="x", state="pending", attempt=1, at=at)


def test_tally_counts_events_per_queue_and_minute() -> None:
    tally = stats.Tally()
    noon = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    tally.add([event("enqueued", "a", noon), event("completed", "a", noon), event("retried", "a", noon)])
    tally.add([event("archived", "b", noon + timedelta(minutes=1)), event("leased", "a", noon)])
    assert tally.take() == {
        ("a", noon.replace(second=0)): {"enqueued": 1, "completed": 1, "failed": 1},
        ("b", noon.replace(second=0) + timedelta(minutes=1)): {"failed": 1},
    }
    assert tally.take() == {}


def test_history_adds_counts_from_several_flushes_and_the_backlog() -> None:
    now = datetime.now(UTC)
    minute = stats.minute_of(now)
    stats.save_counts({("mail", minute): {"enqueued": 3, "completed": 1}})
    stats.save_counts({("mail", minute): {"completed": 2, "failed": 1}})
    stats.record_backlog({"mail": 7}, now)
    body = Client().get("/api/v1/stats/history", {"minutes": 5}).json()
    assert body["series"] == [
        {
            "minute": minute.isoformat().replace("+00:00", "Z"),
            "queue": "mail",
            "enqueued": 3,
            "completed": 3,
            "failed": 1,
            "backlog": 7,
        }
    ]


def test_history_leaves_out_older_minutes() -> None:
    now = datetime.now(UTC)
    stats.save_counts({("mail", stats.minute_of(now) - timedelta(minutes=10)): {"enqueued": 1}})
    assert Client().get("/api/v1/stats/history", {"minutes": 5}).json()["series"] == []


@pytest.mark.parametrize("minutes", ["0", "1441", "x"])
def test_history_rejects_a_bad_window(minutes: str) -> None:
    response = Client().get("/api/v1/stats/history", {"minutes": minutes})
    assert response.status_code == 400
    assert response.json()["field"] == "minutes"
