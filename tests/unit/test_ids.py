"""ULIDs from the injected clock: format, time prefix, monotonic order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor import ids
from conveyor.ids import ALPHABET, new_ulid, new_ulids, random_token

WHEN = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fresh_generator(monkeypatch):
    """Each test starts as a fresh process would (the generator is module state)."""
    monkeypatch.setattr(ids, "_last_ms", -1)
    monkeypatch.setattr(ids, "_last_rand", 0)


def decode_ms(ulid: str) -> int:
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + ALPHABET.index(ch)
    return value


def test_ulid_is_26_crockford_base32_characters():
    ulid = new_ulid(WHEN)

    assert len(ulid) == 26
    assert set(ulid) <= set(ALPHABET)
    assert not set(ulid) & set("ILOU")


def test_ulid_time_prefix_is_the_given_millisecond():
    assert decode_ms(new_ulid(WHEN)) == int(WHEN.timestamp() * 1000)
    later = WHEN + timedelta(milliseconds=1500)
    assert decode_ms(new_ulid(later)) == int(later.timestamp() * 1000)


def test_ulids_of_one_millisecond_are_distinct_and_increasing():
    batch = new_ulids(WHEN, 1000)

    assert len(set(batch)) == 1000
    assert batch == sorted(batch)
    assert {decode_ms(u) for u in batch} == {int(WHEN.timestamp() * 1000)}


def test_ulids_sort_by_time():
    earlier = new_ulid(WHEN)
    later = new_ulid(WHEN + timedelta(milliseconds=1))

    assert earlier < later


def test_ulids_never_go_backwards_when_the_clock_does():
    first = new_ulid(WHEN)
    second = new_ulid(WHEN - timedelta(seconds=5))

    assert second > first


def test_random_token_is_unguessable_and_url_safe():
    tokens = {random_token() for _ in range(100)}

    assert len(tokens) == 100
    assert all(len(t) == 26 and set(t) <= set(ALPHABET) for t in tokens)
    assert len(random_token(32)) == 52


def _digits(value: int, length: int) -> str:
    """Crockford base32 the long way: five bits at a time from the right."""
    out = []
    for _ in range(length):
        out.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


@pytest.mark.parametrize("length", [1, 2, 7, 10, 13, 16, 26, 52])
def test_the_encoding_is_crockford_base32_digit_for_digit(length):
    import random

    rng = random.Random(length)
    top = 32**length - 1
    edges = [v for v in (0, 1, 31, 32, 1023, 1024) if v <= top]
    values = [*edges, top, top >> 1, *(rng.randrange(top + 1) for _ in range(500))]
    assert [ids._encode(v, length) for v in values] == [_digits(v, length) for v in values]


def test_a_ulid_is_its_millisecond_then_its_random_part():
    ulid = new_ulid(WHEN)
    assert ulid == _digits(int(WHEN.timestamp() * 1000), 10) + _digits(ids._last_rand, 16)
