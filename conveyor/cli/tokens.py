"""``conveyor tokens list|new``: the API tokens this configuration accepts, and new ones to add.

Tokens live in ``CONVEYOR_API_TOKENS`` (conveyor.tokens), not in the
database: ``list`` shows what these settings configure (never a token,
only its fingerprint), ``new`` makes a random token and prints the entry
to add to the setting on every node.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.core.management.base import CommandError

from conveyor.cli.common import group, verb
from conveyor.tokens import SCOPES, ApiToken, configured, parse_token


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "tokens", "see the configured API tokens, make a new one")
    verb(verbs, "list", list_tokens, "the tokens of CONVEYOR_API_TOKENS: name, fingerprint, scopes, queues")
    p = verb(verbs, "new", new_token, "make a random token and print its CONVEYOR_API_TOKENS entry")
    p.add_argument(
        "--scope", action="append", required=True, metavar="SCOPE",
        help=f"one of {', '.join(SCOPES)} (repeat, or separate with commas)",
    )  # fmt: skip
    p.add_argument("--queue", action="append", metavar="QUEUE", help="limit produce/consume to this queue (repeat)")
    p.add_argument("--name", default="", help="a label for listings")


def token_row(token: ApiToken) -> dict[str, Any]:
    return {
        "name": token.name,
        "fingerprint": token.fingerprint,
        "scopes": [s for s in SCOPES if s in token.scopes],
        "queues": sorted(token.queues) if token.queues is not None else None,
    }


def list_tokens(args: Any, out: Any) -> None:
    try:
        tokens = configured()
    except ValueError as exc:
        raise CommandError(f"CONVEYOR_API_TOKENS: {exc}") from None
    rows = [token_row(t) for t in tokens]
    out.table([dict(r, queues=r["queues"] or "(all)") for r in rows], ["name", "fingerprint", "scopes", "queues"], rows)
    if not tokens:
        out.note(
            "no tokens: auth is off (a node outside --dev refuses to start without CONVEYOR_ALLOW_UNAUTHENTICATED=1)"
        )


def new_token(args: Any, out: Any) -> None:
    entry: dict[str, Any] = {
        "token": secrets.token_urlsafe(32),
        "scopes": [s.strip() for raw in args.scope for s in raw.split(",") if s.strip()],
    }
    if args.queue:
        entry["queues"] = list(dict.fromkeys(args.queue))
    if args.name:
        entry["name"] = args.name
    try:
        parse_token(entry, "token")
    except ValueError as exc:
        raise CommandError(str(exc).replace("token.scopes", "--scope").replace("token.queues", "--queue")) from None
    out.details([("token", entry["token"]), ("entry", json.dumps(entry))], entry)
    out.note(
        "Add the entry to the JSON list in CONVEYOR_API_TOKENS on every node and restart them; "
        "the token is not stored anywhere else."
    )
