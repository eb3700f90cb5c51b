"""The per-endpoint circuit breaker of webhook gateways (transport failures only)."""

from __future__ import annotations

import pytest

from conveyor.webhooks.breaker import (
    CLOSED,
    MIN_SAMPLES,
    OPEN,
    PROBE_BACKOFF,
    PROBING,
    WINDOW,
    EndpointBreaker,
)


def record(breaker: EndpointBreaker, outcomes: str, now: float = 0.0) -> list[bool]:
    """Feed 'S' (success) and 'F' (failure); return what each call reported."""
    return [breaker.success() if o == "S" else breaker.failure(now) for o in outcomes]


def opened_breaker(now: float = 100.0) -> EndpointBreaker:
    breaker = EndpointBreaker()
    record(breaker, "FFF", now)
    assert breaker.state == OPEN
    return breaker


def test_the_thresholds_are_half_of_at_least_three_samples_over_a_window_of_ten():
    assert (MIN_SAMPLES, WINDOW) == (3, 10)


def test_a_new_breaker_is_closed():
    breaker = EndpointBreaker()

    assert breaker.state == CLOSED
    assert not breaker.probe_due(1e9)


def test_two_failures_are_too_few_samples_to_open():
    breaker = EndpointBreaker()

    assert record(breaker, "FF") == [False, False]
    assert breaker.state == CLOSED


def test_the_third_failure_in_a_row_opens_it():
    breaker = EndpointBreaker()

    assert record(breaker, "FFF") == [False, False, True]
    assert breaker.state == OPEN


@pytest.mark.parametrize("outcomes", ["SFF", "FSF", "SSFF", "SSSFFF", "SFSF"])
def test_half_or_more_failures_over_three_or_more_samples_opens_it(outcomes):
    breaker = EndpointBreaker()

    reports = record(breaker, outcomes)

    assert breaker.state == OPEN
    assert reports[-1] is True
    assert reports.count(True) == 1


@pytest.mark.parametrize("outcomes", ["SSF", "SSSFSF", "SSSSSSSFFF"])
def test_fewer_than_half_failures_keeps_it_closed(outcomes):
    breaker = EndpointBreaker()

    assert not any(record(breaker, outcomes))
    assert breaker.state == CLOSED


def test_only_the_last_ten_samples_count():
    breaker = EndpointBreaker()
    record(breaker, "S" * 10)

    assert record(breaker, "FFFF") == [False, False, False, False]  # 4 of the last 10
    assert breaker.state == CLOSED
    assert record(breaker, "F") == [True]  # 5 of the last 10 (but only 5 of all 15)
    assert breaker.state == OPEN


def test_open_offers_a_probe_only_after_the_first_backoff():
    breaker = opened_breaker(now=100.0)

    assert breaker.retry_at == 100.0 + PROBE_BACKOFF[0]
    assert not breaker.probe_due(100.0 + PROBE_BACKOFF[0] - 0.01)
    assert breaker.probe_due(100.0 + PROBE_BACKOFF[0])


def test_a_probing_breaker_is_not_due_for_another_probe():
    breaker = opened_breaker()
    breaker.start_probe()

    assert breaker.state == PROBING
    assert not breaker.probe_due(1e9)


def test_a_successful_probe_closes_it():
    breaker = opened_breaker()
    breaker.start_probe()

    assert breaker.success() is True
    assert breaker.state == CLOSED


def test_after_closing_the_failure_history_starts_over():
    breaker = opened_breaker()
    breaker.start_probe()
    breaker.success()

    assert record(breaker, "FF") == [False, False]  # [F, F] alone: two samples, not enough
    assert breaker.state == CLOSED


def test_the_first_success_while_open_closes_it():
    # A delivery already in flight when the breaker opened may still succeed.
    breaker = opened_breaker()

    assert breaker.success() is True
    assert breaker.state == CLOSED


def test_a_success_while_closed_reports_no_change():
    breaker = EndpointBreaker()

    assert breaker.success() is False


def test_a_failed_probe_reopens_it_for_longer_each_time():
    breaker = opened_breaker(now=0.0)
    now = 0.0
    delays = [breaker.retry_at - now]
    for _ in range(len(PROBE_BACKOFF) + 1):
        now = breaker.retry_at
        assert breaker.probe_due(now)
        breaker.start_probe()
        assert breaker.failure(now) is True
        assert breaker.state == OPEN
        delays.append(breaker.retry_at - now)

    assert delays == [*PROBE_BACKOFF, PROBE_BACKOFF[-1], PROBE_BACKOFF[-1]]
    assert delays == sorted(delays)


def test_a_failure_while_open_does_not_push_the_probe_back():
    breaker = opened_breaker(now=100.0)
    retry_at = breaker.retry_at

    assert breaker.failure(100.5) is False
    assert breaker.retry_at == retry_at
    assert breaker.state == OPEN


def test_a_success_after_a_failed_probe_starts_the_backoff_over():
    breaker = opened_breaker(now=0.0)
    breaker.start_probe()
    breaker.failure(breaker.retry_at)  # reopened for the second backoff
    breaker.start_probe()
    breaker.success()

    record(breaker, "FFF", now=50.0)

    assert breaker.retry_at == 50.0 + PROBE_BACKOFF[0]
