"""API tokens: the configured bearer tokens, compared in constant time."""

from __future__ import annotations

import hmac

from conveyor.conf import conveyor_settings


def token_valid(presented: str) -> bool:
    """Compare *presented* with every configured token in constant time."""
    ok = False
    for token in conveyor_settings.API_TOKENS:
        ok |= hmac.compare_digest(presented.encode(), token.encode())
    return ok


def auth_required() -> bool:
    return bool(conveyor_settings.API_TOKENS)


def bearer_from_header(header: str) -> str | None:
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return None
