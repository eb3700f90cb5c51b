"""API tokens: the configured bearer tokens, their scopes and queues.

``CONVEYOR_API_TOKENS`` lists the tokens a node accepts. A plain string is a
token with every scope on every queue: how tokens were written before scopes
existed, so such a token keeps full access. An object limits a token::

    {"token": "…", "scopes": ["produce"], "queues": ["email"], "name": "signup-app"}

Scopes (upstream Conveyor's ``produce``, ``consume`` and ``admin``, plus
``read`` for monitoring): ``produce`` enqueues and reads a task by id,
``consume`` holds worker sessions, ``read`` sees everything an operator sees
(lists, stats, events, metrics), ``admin`` is ``read`` plus every operator
action. ``queues`` (produce and consume only) names the queues a token may
enqueue into and serve. Presented tokens are compared with every configured
one in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conveyor.conf import conveyor_settings
from conveyor.exceptions import MissingScope, QueueNotAllowed, Unauthenticated

PRODUCE, CONSUME, READ, ADMIN = "produce", "consume", "read", "admin"
SCOPES = (PRODUCE, CONSUME, READ, ADMIN)
QUEUE_SCOPES = frozenset({PRODUCE, CONSUME})  # the scopes a queue list can limit
FIELDS = {"token", "scopes", "queues", "name"}
QUEUE_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True)
class ApiToken:
    secret: str = field(repr=False)
    scopes: frozenset[str] = frozenset(SCOPES)
    queues: frozenset[str] | None = None  # None: every queue
    name: str = ""

    def grants(self, scope: str) -> bool:
        return scope in self.scopes or (scope == READ and ADMIN in self.scopes)

    def serves(self, queue: str) -> bool:
        return self.queues is None or queue in self.queues

    @property
    def fingerprint(self) -> str:
        """A short digest that names the token in listings without showing it."""
        return hashlib.sha256(self.secret.encode()).hexdigest()[:12]


def parse_tokens(entries: Iterable[Any]) -> list[ApiToken]:
    """The tokens of the setting; ``ValueError`` naming the entry that is wrong."""
    tokens = [parse_token(entry, f"API_TOKENS[{i}]") for i, entry in enumerate(entries)]
    seen: set[str] = set()
    for i, token in enumerate(tokens):
        if token.secret in seen:
            raise ValueError(f"API_TOKENS[{i}]: the same token is listed twice")
        seen.add(token.secret)
    return tokens


def parse_token(entry: Any, where: str) -> ApiToken:
    if isinstance(entry, str):
        return ApiToken(_secret(entry, where))
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be a token string or an object with token and scopes")
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r} (allowed: name, queues, scopes, token)")
    scopes = _names(entry.get("scopes"), f"{where}.scopes")
    bad = sorted(set(scopes) - set(SCOPES))
    if bad:
        raise ValueError(f"{where}.scopes: unknown scope {bad[0]!r} (known: {', '.join(SCOPES)})")
    queues = None
    if entry.get("queues") is not None:
        queues = frozenset(_queue_names(entry["queues"], f"{where}.queues"))
        if not set(scopes) <= QUEUE_SCOPES:
            raise ValueError(f"{where}.queues: queues limit only the produce and consume scopes, not read or admin")
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise ValueError(f"{where}.name: must be a string")
    return ApiToken(_secret(entry.get("token"), f"{where}.token"), frozenset(scopes), queues, name)


def _secret(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: must be a non-empty string")
    if value != value.strip() or any(c.isspace() for c in value):
        raise ValueError(f"{where}: a token cannot contain spaces")
    return value


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: must be a non-empty list of names")
    return value


def _queue_names(value: Any, where: str) -> list[str]:
    names = _names(value, where)
    for name in names:
        if len(name) > 100 or not set(name) <= QUEUE_NAME_CHARS or not name[0].isalnum():
            raise ValueError(f"{where}: {name!r} is not a queue name")
    return names


_parsed: tuple[Any, list[ApiToken]] | None = None


def configured() -> list[ApiToken]:
    """The node's tokens, parsed once per value of the setting."""
    global _parsed
    raw = conveyor_settings.API_TOKENS
    cached = _parsed
    if cached is not None and cached[0] is raw:
        return cached[1]
    tokens = parse_tokens(raw)
    _parsed = (raw, tokens)
    return tokens


def find_token(presented: str) -> ApiToken | None:
    """The configured token equal to *presented*: every one is compared, in constant time."""
    found = None
    given = presented.encode()
    for token in configured():
        if hmac.compare_digest(given, token.secret.encode()):
            found = token
    return found


def token_valid(presented: str) -> bool:
    return find_token(presented) is not None


def auth_required() -> bool:
    return bool(conveyor_settings.API_TOKENS)


def bearer_from_header(header: str) -> str | None:
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return None


def authenticate(header: str) -> ApiToken | None:
    """The token of an ``Authorization`` header; None when auth is off. ``Unauthenticated`` when missing or wrong."""
    if not auth_required():
        return None
    presented = bearer_from_header(header)
    token = find_token(presented) if presented else None
    if token is None:
        raise Unauthenticated("a valid bearer token is required")
    return token


def require_scope(token: ApiToken | None, *needed: str) -> None:
    """Refuse (``MissingScope``) a token that grants none of *needed*; None (auth off, a session) passes."""
    if token is not None and not any(token.grants(scope) for scope in needed):
        raise MissingScope(needed, token.scopes)


def require_queues(token: ApiToken | None, queues: Iterable[str], action: str) -> None:
    """Refuse (``QueueNotAllowed``) a queue-limited token on a queue outside its list."""
    if token is None or token.queues is None:
        return
    for queue in queues:
        if queue not in token.queues:
            raise QueueNotAllowed(queue, token.queues, action)
