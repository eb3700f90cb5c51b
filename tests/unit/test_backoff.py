"""Retry backoff: full-jitter exponential, linear and fixed, each capped."""

from __future__ import annotations

import random

import pytest

from conveyor.backoff import RetryPolicy, backoff_delay


class FixedRandom:
    """An rng whose draws are always *value* (a fraction in [0, 1))."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def ceiling(policy: RetryPolicy, retried: int) -> float:
    """The jitter ceiling: a draw just below 1 lands just below it."""
    return backoff_delay(policy, retried, FixedRandom(1 - 1e-12)) / (1 - 1e-12)


def test_defaults_are_exponential_2s_base_15min_cap():
    assert RetryPolicy() == RetryPolicy(kind="exponential", base=2.0, cap=900.0)


def test_exponential_ceiling_doubles_per_retry_from_base():
    policy = RetryPolicy("exponential", base=2, cap=10_000)

    assert [round(ceiling(policy, r), 6) for r in range(5)] == [2, 4, 8, 16, 32]


def test_exponential_is_full_jitter_over_zero_to_ceiling():
    policy = RetryPolicy("exponential", base=2, cap=900)

    assert backoff_delay(policy, 3, FixedRandom(0.0)) == 0.0
    assert backoff_delay(policy, 3, FixedRandom(0.5)) == 8.0
    assert backoff_delay(policy, 3, FixedRandom(0.999)) < 16.0


def test_exponential_samples_stay_in_the_half_open_range():
    rng = random.Random(7)
    policy = RetryPolicy("exponential", base=2, cap=900)

    for retried in range(12):
        bound = min(2 * 2**retried, 900)
        samples = [backoff_delay(policy, retried, rng) for _ in range(200)]
        assert all(0 <= s < bound for s in samples)
        assert max(samples) > bound / 2  # the jitter spans the range, not just its bottom


def test_exponential_is_capped_even_for_huge_retry_counts():
    policy = RetryPolicy("exponential", base=2, cap=900)

    assert ceiling(policy, 9) == pytest.approx(900)
    assert ceiling(policy, 10_000) == pytest.approx(900)


def test_linear_ceiling_grows_by_base_per_retry_and_is_capped():
    policy = RetryPolicy("linear", base=5, cap=18)

    assert [round(ceiling(policy, r), 6) for r in range(5)] == [5, 10, 15, 18, 18]
    assert backoff_delay(policy, 1, FixedRandom(0.5)) == 5.0


def test_fixed_is_base_capped_without_jitter():
    assert backoff_delay(RetryPolicy("fixed", base=7, cap=900), 0, FixedRandom(0.0)) == 7
    assert backoff_delay(RetryPolicy("fixed", base=7, cap=900), 20, FixedRandom(0.9)) == 7
    assert backoff_delay(RetryPolicy("fixed", base=60, cap=30), 0) == 30
