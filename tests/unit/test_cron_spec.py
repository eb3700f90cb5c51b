"""Cron specs: 5 fields, 6 fields with seconds first, @descriptors, time zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.cron import check_spec, check_timezone, next_fire, next_fires
from conveyor.exceptions import InvalidArgument

T0 = datetime(2026, 1, 1, 10, 7, 0, tzinfo=UTC)


def test_five_field_spec_is_minute_first():
    assert next_fire("*/15 * * * *", "UTC", T0) == datetime(2026, 1, 1, 10, 15, tzinfo=UTC)
    assert next_fire("0 9 * * *", "UTC", T0) == datetime(2026, 1, 2, 9, 0, tzinfo=UTC)


def test_next_fire_is_strictly_after_the_given_time():
    slot = datetime(2026, 1, 1, 10, 15, tzinfo=UTC)

    assert next_fire("*/15 * * * *", "UTC", slot) == slot + timedelta(minutes=15)
    assert next_fire("*/15 * * * *", "UTC", slot - timedelta(microseconds=1)) == slot


def test_six_field_spec_takes_seconds_first():
    assert next_fire("*/5 * * * * *", "UTC", T0) == T0 + timedelta(seconds=5)
    # second 30 of minute 0 of every hour, not "minute 30, hour 0, ... second *"
    assert next_fire("30 0 * * * *", "UTC", T0) == datetime(2026, 1, 1, 11, 0, 30, tzinfo=UTC)


def test_descriptors_are_accepted():
    assert next_fire("@hourly", "UTC", T0) == datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    assert next_fire("@daily", "UTC", T0) == datetime(2026, 1, 2, 0, 0, tzinfo=UTC)


def test_spec_is_read_in_its_time_zone_and_returned_in_utc():
    fire = next_fire("0 9 * * *", "Europe/Paris", T0)  # 09:00 in Paris is 08:00 UTC in winter

    assert fire == datetime(2026, 1, 2, 8, 0, tzinfo=UTC)
    assert fire.utcoffset() == timedelta(0)


def test_next_fires_lists_consecutive_slots():
    assert next_fires("0 */6 * * *", "UTC", T0, 3) == [
        datetime(2026, 1, 1, 12, tzinfo=UTC),
        datetime(2026, 1, 1, 18, tzinfo=UTC),
        datetime(2026, 1, 2, 0, tzinfo=UTC),
    ]


def test_spec_whitespace_is_normalized():
    assert check_spec("  */5   *  * * *  ") == "*/5 * * * *"


def test_invalid_spec_is_rejected_naming_the_spec_field():
    bad = [
        "",
        "   ",
        "* * * *",
        "* * * * * * *",
        "60 * * * *",
        "0 24 * * *",
        "*/0 * * * *",
        "bogus",
        "@every 5m",
        None,
        5,
    ]

    for spec in bad:
        with pytest.raises(InvalidArgument) as err:
            check_spec(spec)
        assert err.value.field == "spec", spec


def test_unknown_time_zone_is_rejected():
    with pytest.raises(InvalidArgument) as err:
        check_timezone("Mars/Olympus_Mons")
    assert err.value.field == "timezone"
    with pytest.raises(InvalidArgument):
        next_fire("* * * * *", "Nowhere/Land", T0)
