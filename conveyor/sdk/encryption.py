"""AES-256-GCM sealing under a keyring, in the envelope upstream Conveyor's SDKs write.

A client with an ``encryptor`` seals each payload before it leaves the
process and marks the task's metadata (``conveyor.encryption: "1"``); a
worker with the same keyring opens marked payloads before the handler sees
them, so the server stores and relays ciphertext only. The node uses the
same envelope for encryption at rest (``conveyor.sealing``), adding what
the value is and which row it belongs to as associated data.

The envelope (docs/encryption.md has it byte by byte)::

    version (1 byte, 0x01) | key id length n (1 byte) | key id (n bytes, UTF-8)
    | nonce (12 bytes) | ciphertext | GCM tag (16 bytes)

The header (version, length, key id) is the GCM associated data, followed
by the caller's ``aad`` if any: a rewritten key id fails authentication.
With no ``aad`` the bytes are what the Go, TypeScript and Python SDKs of
upstream Conveyor write and read.

Needs the ``cryptography`` package (``pip install conveyor[encryption]``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from conveyor.sdk.errors import ConveyorError

VERSION = 1
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
MAX_KEY_ID_BYTES = 255
# Metadata a sealed payload carries, so that a worker opens only sealed
# payloads and plaintext and sealed tasks can share a queue.
MARKER_KEY = "conveyor.encryption"
MARKER_VALUE = "1"


class EncryptionError(ConveyorError):
    """A value could not be sealed or opened."""


class InvalidKey(EncryptionError):
    """A keyring that cannot be used (empty or duplicate id, a secret not 32 bytes)."""


class MalformedCiphertext(EncryptionError):
    """Bytes that are not an envelope (too short, an unknown version)."""


class UnknownKey(EncryptionError):
    """An envelope sealed under a key id the keyring does not hold."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"sealed under key id {key_id!r}, which this keyring does not hold")
        self.key_id = key_id


class AuthenticationFailed(EncryptionError):
    """The GCM tag did not verify: a different secret under that key id, or altered bytes."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"the value sealed under key id {key_id!r} did not authenticate (wrong key or altered)")
        self.key_id = key_id


@runtime_checkable
class Encryptor(Protocol):
    """What ``Client(encryptor=...)`` and ``Worker(encryptor=...)`` take."""

    def encrypt(self, plaintext: bytes) -> bytes: ...

    def decrypt(self, ciphertext: bytes) -> bytes: ...


@dataclass(frozen=True)
class Key:
    """A named AES-256 secret; the id travels in the clear in every envelope."""

    id: str
    secret: bytes = b""

    def __repr__(self) -> str:  # never the secret
        return f"Key({self.id!r})"


def header(key_id: str) -> bytes:
    """The envelope's header for *key_id*: version, length, id."""
    raw = key_id.encode()
    return bytes((VERSION, len(raw))) + raw


def key_id_of(envelope: bytes) -> str:
    """The key id an envelope names; ``MalformedCiphertext`` if it is not one."""
    return _split(envelope)[0]


def _split(envelope: bytes) -> tuple[str, int]:
    if len(envelope) < 2:
        raise MalformedCiphertext("not an envelope: shorter than its header")
    if envelope[0] != VERSION:
        raise MalformedCiphertext(f"not an envelope: version {envelope[0]} is not {VERSION}")
    end = 2 + envelope[1]
    if len(envelope) < end + NONCE_BYTES + TAG_BYTES:
        raise MalformedCiphertext("not an envelope: truncated")
    try:
        return envelope[2:end].decode(), end
    except UnicodeDecodeError:
        raise MalformedCiphertext("not an envelope: the key id is not UTF-8") from None


class AESGCM:
    """The built-in encryptor: AES-256-GCM, a fresh random nonce per value.

    *keys*: ``Key``s, or a mapping of key id to 32-byte secret. New values are
    sealed under *active* (default: the first key); any key of the ring opens
    what was sealed under it, so an old key kept in the ring still opens old
    values after a rotation. Safe to share between threads.
    """

    def __init__(self, keys: Iterable[Key] | Mapping[str, bytes], active: str | None = None) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM as Cipher
        except ImportError as exc:  # pragma: no cover - the server always has it
            raise ImportError("encryption needs the cryptography package: pip install conveyor[encryption]") from exc
        ring = [Key(k, v) for k, v in keys.items()] if isinstance(keys, Mapping) else list(keys)
        if not ring:
            raise InvalidKey("a keyring needs at least one key")
        self._ciphers: dict[str, Any] = {}
        for key in ring:
            _check_key(key)
            if key.id in self._ciphers:
                raise InvalidKey(f"key id {key.id!r} appears twice")
            self._ciphers[key.id] = Cipher(bytes(key.secret))
        self.active = ring[0].id if active is None else active
        if self.active not in self._ciphers:
            raise InvalidKey(f"the active key id {self.active!r} is not among the keys")
        self.key_ids = [key.id for key in ring]

    def encrypt(self, plaintext: bytes, *, aad: bytes = b"", key_id: str | None = None) -> bytes:
        """Seal *plaintext* under *key_id* (default: the active key).

        *aad*: more associated data after the header (the server names the
        row and column); the same must be given to ``decrypt``.
        """
        return self.seal_with_nonce(plaintext, os.urandom(NONCE_BYTES), aad=aad, key_id=key_id)

    def seal_with_nonce(self, plaintext: bytes, nonce: bytes, *, aad: bytes = b"", key_id: str | None = None) -> bytes:
        """``encrypt`` with a given nonce: for known-answer tests only (a nonce
        must never repeat under one key)."""
        kid = self.active if key_id is None else key_id
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise UnknownKey(kid)
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"a nonce is {NONCE_BYTES} bytes")
        head = header(kid)
        return head + nonce + cipher.encrypt(nonce, bytes(plaintext), head + aad)

    def decrypt(self, ciphertext: bytes, *, aad: bytes = b"") -> bytes:
        """Open an envelope sealed under any key of the ring."""
        from cryptography.exceptions import InvalidTag

        data = bytes(ciphertext)
        kid, end = _split(data)
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise UnknownKey(kid)
        nonce = data[end : end + NONCE_BYTES]
        try:
            return cipher.decrypt(nonce, data[end + NONCE_BYTES :], data[:end] + aad)
        except InvalidTag:
            raise AuthenticationFailed(kid) from None

    def holds(self, key_id: str) -> bool:
        return key_id in self._ciphers

    def __repr__(self) -> str:
        return f"AESGCM(keys={self.key_ids!r}, active={self.active!r})"


def _check_key(key: Key) -> None:
    if not isinstance(key.id, str) or not key.id:
        raise InvalidKey("a key id must be a non-empty string")
    if len(key.id.encode()) > MAX_KEY_ID_BYTES:
        raise InvalidKey(f"key id {key.id[:40]!r}... is longer than {MAX_KEY_ID_BYTES} bytes")
    if not isinstance(key.secret, (bytes, bytearray)) or len(key.secret) != KEY_BYTES:
        size = len(key.secret) if isinstance(key.secret, (bytes, bytearray)) else type(key.secret).__name__
        raise InvalidKey(f"key {key.id!r}: the secret must be {KEY_BYTES} bytes, not {size}")


def is_marked(metadata: Mapping[str, str] | None) -> bool:
    """Whether a task's metadata says its payload was sealed end to end."""
    return bool(metadata) and bool(metadata.get(MARKER_KEY))  # type: ignore[union-attr]


# -- the SDK's use: sealing a request's payload, opening a dispatched one ---------------


def seal_request(body: dict[str, Any], encryptor: Encryptor) -> dict[str, Any]:
    """A task request (``task_request``'s dict) with its payload sealed under
    *encryptor* and its metadata marked; a new dict.

    ``unique=True`` becomes the unique key the server would derive from the
    plaintext (its type and payload), since the server sees ciphertext only,
    sealed with a fresh nonce each time. An empty payload stays empty and
    unmarked, as upstream's SDKs leave it.
    """
    out = dict(body)
    if "json" in out:
        plain = json.dumps(out.pop("json"), separators=(",", ":"), ensure_ascii=False).encode()
        out["content_type"] = out.get("content_type") or "application/json"
    else:
        plain = base64.b64decode(out.get("payload") or "")
    if out.get("unique") and not out.get("unique_key"):
        out.pop("unique")
        out["unique_key"] = content_key(str(out.get("type", "")), plain)
    if not plain:
        out.pop("payload", None)
        return out
    out["payload"] = base64.b64encode(encryptor.encrypt(plain)).decode()
    out.setdefault("content_type", "application/octet-stream")
    out["metadata"] = {**(out.get("metadata") or {}), MARKER_KEY: MARKER_VALUE}
    return out


def content_key(task_type: str, payload: bytes) -> str:
    """The unique key of "unique by content": sha256 of type, NUL, payload.

    The one definition: the server derives ``unique=True`` keys with it, and
    a client sealing end to end sends the same key, computed on the plaintext.
    """
    return "sha256:" + hashlib.sha256(task_type.encode() + b"\x00" + payload).hexdigest()


def open_payload(payload: bytes, metadata: dict[str, str], encryptor: Encryptor | None) -> tuple[bytes, str]:
    """A dispatched payload opened when its metadata marks it sealed (the
    marker is taken out of *metadata*), and "" or why it cannot be opened
    here (then the handler must not run)."""
    if not is_marked(metadata):
        return payload, ""
    if encryptor is None:
        key = _key_of(payload)
        return b"", f"not run: its payload is sealed end to end (key id {key!r}) and this worker has no encryptor"
    try:
        opened = encryptor.decrypt(payload)
    except Exception as exc:  # (any encryptor's failure: the handler must not see ciphertext)
        return b"", f"not run: its payload did not open: {exc}"
    del metadata[MARKER_KEY]
    return opened, ""


def _key_of(payload: bytes) -> str:
    try:
        return key_id_of(payload)
    except MalformedCiphertext:
        return "?"
