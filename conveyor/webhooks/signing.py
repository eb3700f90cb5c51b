"""Delivery signatures: ``v1=`` + hex HMAC-SHA256 of ``"{timestamp}.{body}"``."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

TIMESTAMP_HEADER = "X-Conveyor-Timestamp"
SIGNATURE_HEADER = "X-Conveyor-Signature"
REPLAY_WINDOW = 300  # seconds


def signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def signed_headers(secrets: Sequence[str], body: bytes, now: float | None = None) -> dict[str, str]:
    """Headers for a delivery, signed with the newest secret (none without a secret)."""
    headers = {"Content-Type": "application/json"}
    if secrets:
        timestamp = str(int(now if now is not None else time.time()))
        headers[TIMESTAMP_HEADER] = timestamp
        headers[SIGNATURE_HEADER] = signature(secrets[0], timestamp, body)
    return headers


def verify(secrets: Sequence[str], timestamp: str, sig: str, body: bytes, now: float | None = None) -> bool:
    """Constant-time check against every secret, within the replay window."""
    # Header values are untrusted text: only ASCII digits make a timestamp
    # (int() would take other scripts' digits), and the signature is compared
    # as bytes (compare_digest raises on non-ASCII str).
    if not isinstance(timestamp, str) or not (timestamp.isascii() and timestamp.isdigit()):
        return False
    age = abs((now if now is not None else time.time()) - int(timestamp))
    given = sig.encode("utf-8", "replace") if isinstance(sig, str) else b""
    ok = False
    for secret in secrets:
        ok |= hmac.compare_digest(signature(secret, timestamp, body).encode(), given)
    return ok and age <= REPLAY_WINDOW
