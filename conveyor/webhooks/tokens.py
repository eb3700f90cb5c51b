"""Lease tokens: what an asynchronous webhook endpoint shows to call back.

A token names one delivery (task id + lease id) and carries an HMAC made
with the server's secret key, so it cannot be forged or pointed at another
task. It needs no storage: it is valid exactly while that lease is (the
lease id is fresh per delivery and the broker checks it on every call).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from django.conf import settings

from conveyor.exceptions import Unauthenticated

PREFIX = "clt1"
NOT_OURS = "leaseToken is not a lease token issued by this server"


def _mac(task_id: str, lease_id: str) -> str:
    key = hashlib.sha256(b"conveyor.lease-token:" + settings.SECRET_KEY.encode()).digest()
    digest = hmac.new(key, f"{task_id}\n{lease_id}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:18]).decode()


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


def mint(task_id: str, lease_id: str) -> str:
    return ".".join((PREFIX, _b64(task_id), _b64(lease_id), _mac(task_id, lease_id)))


def open_token(token: object) -> tuple[str, str]:
    """Return (task id, lease id); raise Unauthenticated for anything not minted here.

    The token is the callback's only credential, so a missing or forged one is
    *unauthenticated* (401), not a bad argument.
    """
    if not isinstance(token, str) or not token:
        raise Unauthenticated("leaseToken is required: the lease token of the delivery (params.lease.token)")
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != PREFIX:
        raise Unauthenticated(NOT_OURS)
    try:
        task_id, lease_id = _unb64(parts[1]), _unb64(parts[2])
    except (ValueError, UnicodeDecodeError):
        raise Unauthenticated(NOT_OURS) from None
    # Compared as bytes: compare_digest raises TypeError on non-ASCII str.
    if not hmac.compare_digest(_mac(task_id, lease_id).encode(), parts[3].encode("utf-8", "replace")):
        raise Unauthenticated(NOT_OURS)
    return task_id, lease_id
