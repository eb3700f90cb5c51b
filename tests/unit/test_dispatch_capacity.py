"""How a worker's declared concurrency is split across its queues by weight."""

from __future__ import annotations

import pytest

from conveyor.dispatch.gateway import split_capacity


def test_weights_three_to_one_over_four_slots():
    assert split_capacity(4, {"billing": 3, "default": 1}) == {"billing": 3, "default": 1}


def test_weights_three_to_one_over_ten_slots_give_the_spare_slot_to_the_larger_remainder_first():
    # Exact shares 7.5 and 2.5: the one spare slot goes to the first of the tie.
    assert split_capacity(10, {"billing": 3, "default": 1}) == {"billing": 8, "default": 2}


def test_the_spare_slots_go_to_the_largest_remainders():
    # Exact shares 5.71, 2.86, 1.43: floors 5, 2, 1, two spares to .86 then .71.
    assert split_capacity(10, {"a": 4, "b": 2, "c": 1}) == {"a": 6, "b": 3, "c": 1}


def test_one_queue_gets_everything():
    assert split_capacity(7, {"only": 5}) == {"only": 7}


def test_equal_weights_split_evenly():
    assert split_capacity(9, {"a": 1, "b": 1, "c": 1}) == {"a": 3, "b": 3, "c": 3}


def test_more_queues_than_slots_still_give_each_queue_one():
    assert split_capacity(2, {"a": 5, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}


def test_a_tiny_weight_still_gets_one_slot():
    shares = split_capacity(10, {"big": 100, "small": 1})

    assert shares["small"] == 1
    assert sum(shares.values()) == 10


@pytest.mark.parametrize(
    ("concurrency", "weights"),
    [
        (4, {"a": 3, "b": 1}),
        (10, {"a": 3, "b": 1}),
        (100, {"a": 7, "b": 5, "c": 3, "d": 1}),
        (5, {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}),
        (13, {"a": 2, "b": 2, "c": 2}),
        (1000, {"a": 999, "b": 1}),
    ],
)
def test_shares_sum_to_the_concurrency_when_there_are_enough_slots(concurrency, weights):
    shares = split_capacity(concurrency, weights)

    assert sum(shares.values()) == concurrency
    assert set(shares) == set(weights)
    assert min(shares.values()) >= 1


@pytest.mark.parametrize(
    ("concurrency", "weights"),
    [(10, {"a": 1, "b": 1, "c": 100}), (4, {"a": 1, "b": 1, "c": 10})],
)
def test_shares_never_exceed_the_concurrency_when_each_queue_can_have_a_slot(concurrency, weights):
    assert sum(split_capacity(concurrency, weights).values()) == concurrency
