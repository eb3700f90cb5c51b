"""The AES-256-GCM envelope, pinned byte for byte, and the server keyring's parsing."""

from __future__ import annotations

import base64

import pytest

from conveyor.conf import parse_keyring
from conveyor.sdk.encryption import (
    AESGCM,
    AuthenticationFailed,
    InvalidKey,
    Key,
    MalformedCiphertext,
    UnknownKey,
    header,
    key_id_of,
)

K1 = bytes([1]) * 32

# Sealed by upstream Conveyor's Go SDK (encryption.AESGCM) under key id "k1"
# with a secret of 32 bytes 0x01: the envelope both SDKs must read.
UPSTREAM_GO = bytes.fromhex("01026b31fa2631bc8ec32f8344f3319d4fed95d45187a2599c8ec57922b1de221cdf147ddcfed37d1cae62")

# Our known answer: key "k1" = 32 x 0x01, nonce 00 01 .. 0b, plaintext below.
KAT_PLAINTEXT = b'{"card":"4111"}'
KAT_NONCE = bytes(range(12))
KAT = bytes.fromhex(
    "01"  # version
    "02"  # key id length
    "6b31"  # "k1"
    "000102030405060708090a0b"  # nonce
    "c084f647529a2443dc5ed6f5114bb5"  # ciphertext (15 bytes, as the plaintext)
    "9bf585f92a159d29d3fb276563684280"  # GCM tag over header (as associated data) and ciphertext
)


def test_the_known_answer_vector_is_what_our_sealing_writes() -> None:
    assert AESGCM({"k1": K1}).seal_with_nonce(KAT_PLAINTEXT, KAT_NONCE) == KAT


def test_an_envelope_sealed_by_upstreams_go_sdk_opens_and_is_what_we_seal_with_its_nonce() -> None:
    ring = AESGCM({"k1": K1})
    assert ring.decrypt(UPSTREAM_GO) == b"launch-code"
    assert ring.seal_with_nonce(b"launch-code", UPSTREAM_GO[4:16]) == UPSTREAM_GO  # the reverse direction


def test_the_envelope_is_header_nonce_ciphertext_tag() -> None:
    sealed = AESGCM({"k1": K1}).encrypt(b"x")
    assert sealed[:4] == header("k1") == b"\x01\x02k1"
    assert len(sealed) == 4 + 12 + 1 + 16
    assert key_id_of(sealed) == "k1"
    assert AESGCM({"k1": K1}).encrypt(b"x")[4:16] != sealed[4:16]  # a fresh nonce each time


def test_a_rewritten_key_id_fails_authentication() -> None:
    ring = AESGCM({"k1": K1, "k2": bytes([2]) * 32})
    forged = bytearray(ring.encrypt(b"secret"))
    forged[3] = ord("2")  # the header now names k2, a key the ring holds
    with pytest.raises(AuthenticationFailed):
        ring.decrypt(bytes(forged))


def test_associated_data_must_match() -> None:
    ring = AESGCM({"k1": K1})
    sealed = ring.encrypt(b"secret", aad=b"task.payload\x00id-1")
    assert ring.decrypt(sealed, aad=b"task.payload\x00id-1") == b"secret"
    with pytest.raises(AuthenticationFailed):
        ring.decrypt(sealed, aad=b"task.payload\x00id-2")
    with pytest.raises(AuthenticationFailed):
        ring.decrypt(sealed)


def test_rotation_seals_under_the_first_key_and_opens_under_any() -> None:
    old = AESGCM({"k1": K1}).encrypt(b"old")
    rotated = AESGCM([Key("k2", bytes([2]) * 32), Key("k1", K1)])
    assert rotated.decrypt(old) == b"old"
    assert key_id_of(rotated.encrypt(b"new")) == "k2"


@pytest.mark.parametrize(
    "data, error",
    [
        (b"", MalformedCiphertext),
        (b"\x02\x02k1" + bytes(28), MalformedCiphertext),  # another version
        (b"\x01\x05k1", MalformedCiphertext),  # truncated
        (b"\x01\x02k9" + bytes(28), UnknownKey),
    ],
)
def test_what_is_not_an_envelope_of_the_ring_is_refused_by_name(data: bytes, error: type) -> None:
    with pytest.raises(error):
        AESGCM({"k1": K1}).decrypt(data)


@pytest.mark.parametrize(
    "keys, active",
    [({}, None), ({"": K1}, None), ({"k1": K1[:16]}, None), ({"k1": K1}, "k2"), ({"x" * 256: K1}, None)],
)
def test_an_unusable_keyring_is_refused(keys: dict[str, bytes], active: str | None) -> None:
    with pytest.raises(InvalidKey):
        AESGCM(keys, active)


def test_a_key_never_shows_its_secret() -> None:
    assert "\\x01" not in repr(Key("k1", K1)) and "\\x01" not in repr(AESGCM({"k1": K1}))


# -- CONVEYOR_ENCRYPTION_KEYS -------------------------------------------------------------


def b64(secret: bytes) -> str:
    return base64.b64encode(secret).decode()


def test_the_keyring_setting_reads_every_form_active_first() -> None:
    two = bytes([2]) * 32
    expected = (("k2", two), ("k1", K1))
    assert parse_keyring(f"k2:{b64(two)}, k1:{b64(K1)}") == expected
    assert parse_keyring([f"k2:{b64(two)}", f"k1:{b64(K1)}"]) == expected
    assert parse_keyring({"k2": b64(two), "k1": K1}) == expected
    assert parse_keyring(f"k1:{base64.urlsafe_b64encode(K1).decode().rstrip('=')}") == (("k1", K1),)
    assert parse_keyring("") == ()


@pytest.mark.parametrize(
    "value, message",
    [
        (f"k1{b64(K1)}", "id:BASE64"),
        (f"k 1:{b64(K1)}", "must be 1-64 of"),
        (f"k1:{b64(K1[:16])}", "is 16 bytes; AES-256 needs 32"),
        ("k1:not*base64", "is not base64"),
        (f"k1:{b64(K1)},k1:{b64(K1)}", "appears twice"),
    ],
)
def test_a_bad_keyring_setting_names_the_key_never_the_secret(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        parse_keyring(value)
    assert b64(K1) not in str(raised.value)
