"""The JSON body the SDK makes for a task (task_request)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conveyor.sdk import task_request


def test_an_aware_time_is_sent_as_it_is() -> None:
    when = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert task_request("t", process_at=when)["process_at"] == "2026-12-01T09:30:00+00:00"


def test_a_naive_time_is_the_machines_local_time() -> None:
    naive = datetime(2026, 12, 1, 9, 30)
    sent = datetime.fromisoformat(task_request("t", deadline=naive)["deadline"])
    assert sent.utcoffset() is not None  # the server refuses a time without a zone
    assert sent == naive.astimezone()  # the same instant as Python's local-time reading


def test_durations_go_as_seconds() -> None:
    body = task_request("t", process_in=timedelta(minutes=2), timeout=1.5, retention="7d")
    assert (body["process_in"], body["timeout"], body["retention"]) == (120.0, 1.5, "7d")
