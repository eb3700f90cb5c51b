"""Delivery signatures: ``v1=`` + hex HMAC-SHA256 of ``"{timestamp}.{body}"``."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from conveyor.webhooks.signing import (
    REPLAY_WINDOW,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
    signed_headers,
    verify,
)

BODY = b'{"jsonrpc":"2.0","id":"01KX3E7T2M4Q9RZC8B1JW5HD6P","method":"conveyor.task.execute"}'
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_signature_is_v1_hex_hmac_sha256_of_timestamp_dot_body():
    expected = hmac.new(b"s3cret", b"1767225600." + BODY, hashlib.sha256).hexdigest()

    assert signature("s3cret", "1767225600", BODY) == "v1=" + expected


def test_signed_headers_carry_the_unix_timestamp_and_the_newest_secrets_signature():
    headers = signed_headers(["new", "old"], BODY, now=NOW + 0.9)

    assert headers == {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: "1767225600",
        SIGNATURE_HEADER: signature("new", "1767225600", BODY),
    }
    assert TIMESTAMP_HEADER == "X-Conveyor-Timestamp"
    assert SIGNATURE_HEADER == "X-Conveyor-Signature"


def test_without_a_secret_the_signature_headers_are_omitted():
    assert signed_headers([], BODY, now=NOW) == {"Content-Type": "application/json"}


def test_a_signed_delivery_verifies():
    headers = signed_headers(["s3cret"], BODY, now=NOW)

    assert verify(["s3cret"], headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], BODY, now=NOW)


@pytest.mark.parametrize("receiver_secrets", [["new", "old"], ["old", "new"], ["new"]])
def test_during_rotation_a_receiver_holding_either_order_of_two_secrets_verifies(receiver_secrets):
    headers = signed_headers(["new", "old"], BODY, now=NOW)

    assert verify(receiver_secrets, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], BODY, now=NOW)


def test_a_signature_made_with_the_old_secret_verifies_against_two_secrets():
    ts = "1767225600"

    assert verify(["new", "old"], ts, signature("old", ts, BODY), BODY, now=NOW)


def test_a_signature_made_with_another_secret_fails():
    ts = "1767225600"

    assert not verify(["new", "old"], ts, signature("stranger", ts, BODY), BODY, now=NOW)


def test_no_secret_verifies_nothing():
    ts = "1767225600"

    assert not verify([], ts, signature("s3cret", ts, BODY), BODY, now=NOW)


def test_a_tampered_body_fails():
    ts = "1767225600"
    sig = signature("s3cret", ts, BODY)

    assert not verify(["s3cret"], ts, sig, BODY.replace(b"execute", b"cancel"), now=NOW)
    assert not verify(["s3cret"], ts, sig, BODY + b" ", now=NOW)


def test_a_tampered_timestamp_fails():
    sig = signature("s3cret", "1767225600", BODY)

    assert not verify(["s3cret"], "1767225601", sig, BODY, now=NOW)


@pytest.mark.parametrize("skew", [-REPLAY_WINDOW, 0, REPLAY_WINDOW])
def test_a_timestamp_inside_the_replay_window_verifies(skew):
    ts = str(int(NOW))

    assert verify(["s3cret"], ts, signature("s3cret", ts, BODY), BODY, now=NOW + skew)


@pytest.mark.parametrize("skew", [-REPLAY_WINDOW - 1, REPLAY_WINDOW + 1, 3600])
def test_a_timestamp_outside_the_replay_window_fails_even_with_a_good_signature(skew):
    ts = str(int(NOW))

    assert not verify(["s3cret"], ts, signature("s3cret", ts, BODY), BODY, now=NOW + skew)


def test_the_replay_window_is_five_minutes():
    assert REPLAY_WINDOW == 300


@pytest.mark.parametrize("ts", ["", "soon", "1767225600.5", None])
def test_a_timestamp_that_is_not_unix_seconds_fails(ts):
    assert not verify(["s3cret"], ts, "v1=00", BODY, now=NOW)


@pytest.mark.parametrize("sig", ["", None, "v1=", "v2=abc", "v1=" + "0" * 64])
def test_a_missing_or_malformed_signature_fails(sig):
    assert not verify(["s3cret"], "1767225600", sig, BODY, now=NOW)


def test_a_signature_header_with_non_ascii_characters_fails_instead_of_raising():
    # Header values arrive decoded as latin-1; anything may be in them.
    assert not verify(["s3cret"], "1767225600", "v1=\u00e9\u00e9", BODY, now=NOW)


def test_a_timestamp_in_non_ascii_digits_fails():
    ts = "\uff11\uff17\uff16\uff17\uff12\uff12\uff15\uff16\uff10\uff10"  # fullwidth 1767225600, which int() accepts

    assert not verify(["s3cret"], ts, signature("s3cret", ts, BODY), BODY, now=NOW)
