"""The per-task-type breaker of gateways: a failing type is fed at probe speed."""

from __future__ import annotations

import pytest

from conveyor.dispatch.breaker import FAILURE_RATIO, MIN_SAMPLES, OPEN_FOR, WINDOW, TypeBreaker


def feed(breaker: TypeBreaker, outcomes: str, now: float = 0.0, task_type: str = "email") -> None:
    for o in outcomes:
        breaker.record(task_type, o == "S", now)


def test_thresholds_are_half_of_at_least_ten_outcomes_for_thirty_seconds():
    assert (FAILURE_RATIO, MIN_SAMPLES, OPEN_FOR, WINDOW) == (0.5, 10, 30.0, 20)


def test_nine_failures_are_too_few_to_open():
    breaker = TypeBreaker()
    feed(breaker, "F" * 9)

    assert not breaker.is_open("email", 0.0)


def test_the_tenth_outcome_opens_it_when_half_failed():
    breaker = TypeBreaker()
    feed(breaker, "SFSFSFSFS")
    assert not breaker.is_open("email", 0.0)

    feed(breaker, "F")

    assert breaker.is_open("email", 0.0)


def test_less_than_half_failed_keeps_it_closed():
    breaker = TypeBreaker()
    feed(breaker, "SSSSSSFFFF" + "SSFF")  # 6 of 14

    assert not breaker.is_open("email", 0.0)


def test_only_the_last_twenty_outcomes_count():
    breaker = TypeBreaker()
    feed(breaker, "S" * 30)

    feed(breaker, "F" * 9)  # 9 of the last 20
    assert not breaker.is_open("email", 0.0)

    feed(breaker, "F")  # 10 of the last 20 (but only 10 of all 40)
    assert breaker.is_open("email", 0.0)


def test_it_stays_open_for_thirty_seconds():
    breaker = TypeBreaker()
    feed(breaker, "F" * 10, now=100.0)

    assert breaker.is_open("email", 100.0 + OPEN_FOR - 0.001)
    assert not breaker.is_open("email", 100.0 + OPEN_FOR)


def test_successes_while_open_do_not_close_it_early():
    breaker = TypeBreaker()
    feed(breaker, "F" * 10, now=100.0)

    feed(breaker, "S" * 20, now=110.0)

    assert breaker.is_open("email", 110.0)


def test_more_failures_while_open_do_not_extend_it():
    breaker = TypeBreaker()
    feed(breaker, "F" * 10, now=100.0)

    feed(breaker, "F" * 10, now=120.0)

    assert not breaker.is_open("email", 100.0 + OPEN_FOR)


def test_after_it_was_open_the_window_starts_over():
    breaker = TypeBreaker()
    feed(breaker, "F" * 10, now=0.0)

    feed(breaker, "F" * 9, now=OPEN_FOR)  # a fresh window of nine

    assert not breaker.is_open("email", OPEN_FOR)
    feed(breaker, "F", now=OPEN_FOR)
    assert breaker.is_open("email", OPEN_FOR)


def test_types_are_judged_apart():
    breaker = TypeBreaker()
    feed(breaker, "F" * 10, task_type="email")
    feed(breaker, "S" * 10, task_type="sms")

    assert breaker.is_open("email", 0.0)
    assert not breaker.is_open("sms", 0.0)
    assert not breaker.is_open("never-seen", 0.0)


@pytest.mark.parametrize("probe_delay", [1.0, 2.5])
def test_refund_is_delayed_by_the_probe_delay_only_while_open(probe_delay):
    breaker = TypeBreaker(probe_delay=probe_delay)
    assert breaker.refund_delay("email", 0.0) == 0.0

    feed(breaker, "F" * 10, now=0.0)

    assert breaker.refund_delay("email", 1.0) == probe_delay
    assert breaker.refund_delay("sms", 1.0) == 0.0
    assert breaker.refund_delay("email", OPEN_FOR) == 0.0
