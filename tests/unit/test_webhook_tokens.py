"""Lease tokens of webhook deliveries: minted here, opened only if unforged."""

from __future__ import annotations

import pytest
from django.test import override_settings

from conveyor.exceptions import ConveyorError
from conveyor.webhooks.tokens import PREFIX, mint, open_token

TASK = "01KX3CAWA7WMGN3R5EA7JJCFA0"
LEASE = "01KX3E7T2M4Q9RZC8B1JW5HD6P"
OTHER_TASK = "01KX3CAWA7WMGN3R5EA7JJCFA1"


def refused(token: object) -> ConveyorError:
    """Open *token*, expecting the domain error that names the lease token (never a crash)."""
    with pytest.raises(ConveyorError) as info:
        open_token(token)
    assert "leaseToken" in str(info.value)
    return info.value


def test_a_minted_token_opens_to_its_task_and_lease():
    assert open_token(mint(TASK, LEASE)) == (TASK, LEASE)


def test_a_token_is_prefixed_and_dot_separated():
    parts = mint(TASK, LEASE).split(".")

    assert parts[0] == PREFIX == "clt1"
    assert len(parts) == 4


def test_tokens_of_two_leases_of_one_task_differ():
    assert mint(TASK, LEASE) != mint(TASK, "01KX3E7T2M4Q9RZC8B1JW5HD6Q")


def test_a_token_whose_task_id_was_swapped_for_another_task_is_refused():
    mine = mint(TASK, LEASE).split(".")
    theirs = mint(OTHER_TASK, LEASE).split(".")

    refused(".".join([mine[0], theirs[1], mine[2], mine[3]]))


def test_a_token_whose_lease_id_was_swapped_is_refused():
    mine = mint(TASK, LEASE).split(".")
    other = mint(TASK, "01KX3E7T2M4Q9RZC8B1JW5HD6Q").split(".")

    refused(".".join([mine[0], mine[1], other[2], mine[3]]))


def test_a_forged_mac_is_refused():
    prefix, task, lease, mac = mint(TASK, LEASE).split(".")
    forged = ("A" if mac[0] != "A" else "B") + mac[1:]

    refused(".".join([prefix, task, lease, forged]))


def test_a_token_minted_with_another_secret_key_is_refused():
    with override_settings(SECRET_KEY="another-server-entirely-" + "x" * 40):
        foreign = mint(TASK, LEASE)

    refused(foreign)


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_truncated_token_is_refused(cut):
    token = mint(TASK, LEASE)

    refused(token[:-cut])


def test_a_token_missing_a_part_is_refused():
    prefix, task, lease, mac = mint(TASK, LEASE).split(".")

    refused(".".join([prefix, task, mac]))
    refused(".".join([prefix, task, lease, mac, mac]))


def test_a_token_with_another_prefix_is_refused():
    _prefix, task, lease, mac = mint(TASK, LEASE).split(".")

    refused(".".join(["clt2", task, lease, mac]))


@pytest.mark.parametrize("token", [None, "", 42, ["clt1"], {"token": "x"}])
def test_a_missing_or_non_string_token_is_refused_as_required(token):
    assert "required" in str(refused(token))


@pytest.mark.parametrize(
    "token",
    ["clt1.!!!.???.abc", "clt1.\u00e9.\u00e9.\u00e9", "clt1...", "not a token at all"],
)
def test_garbage_is_refused(token):
    refused(token)


def test_a_valid_looking_token_with_a_non_ascii_mac_is_refused_not_crashed():
    prefix, task, lease, _mac = mint(TASK, LEASE).split(".")

    refused(".".join([prefix, task, lease, "\u00e9" * 24]))
