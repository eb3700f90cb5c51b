"""A broker's memory of queues where an enqueue found no offer to take (broker/offers.py, MISS_PAUSE)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from conveyor.broker.offers import MISS_PAUSE, MISSES_KEPT, Misses

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_queue_is_skipped_from_its_miss_until_the_pause_is_over():
    misses = Misses()
    misses.missed("email", NOW)

    assert misses.skip("email", NOW) and misses.skip("email", NOW + MISS_PAUSE - timedelta(microseconds=1))
    assert not misses.skip("sms", NOW)
    assert not misses.skip("email", NOW + MISS_PAUSE)
    assert not misses.skip("email", NOW)  # forgotten once over, not skipped again


def test_a_found_offer_ends_the_pause():
    misses = Misses()
    misses.missed("email", NOW)
    misses.found("email")

    assert not misses.skip("email", NOW)


def test_past_the_number_kept_every_queue_is_forgotten():
    misses = Misses()
    for i in range(MISSES_KEPT):
        misses.missed(f"q{i}", NOW)
    assert misses.skip("q0", NOW)

    misses.missed("one more", NOW)

    assert not misses.skip("q0", NOW) and misses.skip("one more", NOW)


def test_a_clock_set_back_does_not_stretch_the_pause():
    misses = Misses()
    misses.missed("email", NOW)

    assert not misses.skip("email", NOW - timedelta(hours=1))
