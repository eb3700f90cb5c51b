"""``conveyor webhooks add|list|pause|resume|delete``: HTTP endpoints as workers."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from conveyor.api import render
from conveyor.broker import get_broker
from conveyor.broker.types import WebhookSpec
from conveyor.cli.common import duration, group, to_int, to_seconds, verb
from conveyor.exceptions import InvalidArgument, NotFound
from conveyor.models import WebhookStatus

HTTP_WARNING = (
    "warning: {url} is plain http://, which only dev or unauthenticated nodes (--dev, or no "
    "CONVEYOR_API_TOKENS) deliver to; use https:// in production"
)


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "webhooks", "webhook registrations: HTTP endpoints that work tasks")
    field_flags = {"queues": "--queue", "secrets": "--secret", "batch_types": "--batch-type"}
    p = verb(verbs, "add", add, "register an endpoint, or replace every field of an existing one", field_flags)
    p.add_argument("name", help="unique handle, e.g. billing-hooks")
    p.add_argument("url", help="delivery URL (https://; http:// only for dev nodes)")
    p.add_argument(
        "--queue", metavar="NAME=WEIGHT", action="append", required=True, help="served queue and weight (repeatable)"
    )
    p.add_argument("--secret", action="append", help="signing secret, newest first (repeatable: two during rotation)")
    p.add_argument(
        "--concurrency", metavar="N", default="10", help="max in-flight tasks across its queues (default 10)"
    )
    p.add_argument(
        "--batch-type", action="append", help="task type delivered as one batch when its group fires (repeatable)"
    )
    p.add_argument("--request-timeout", metavar="DURATION", help="synchronous response wait (server default 30s)")
    p.add_argument("--paused", action="store_true", help="register without delivering")
    verb(verbs, "list", list_webhooks, "list registrations (secrets are never shown)", changes=False)
    for action in ("pause", "resume", "delete"):
        p = verb(verbs, action, act, f"{action} a registration")
        p.add_argument("name")
        p.set_defaults(action=action)


def add(args: Any, out: Any) -> None:
    spec = WebhookSpec(
        name=args.name,
        url=args.url,
        queues=queue_weights(args.queue),
        concurrency=to_int(args.concurrency, "--concurrency"),  # type: ignore[arg-type]
        secrets=args.secret or [],
        batch_types=args.batch_type or [],
        request_timeout=to_seconds(args.request_timeout, "--request-timeout"),
        paused=args.paused,
    )
    reg = get_broker().upsert_webhook(spec)
    if urlsplit(reg.url).scheme == "http":
        out.note(HTTP_WARNING.format(url=reg.url))
    served = ",".join(f"{q}={w}" for q, w in reg.queues.items())
    secrets = len(reg.secrets or [])
    text = f"registered webhook {reg.name} -> {reg.url} (queues {served}; concurrency {reg.concurrency}; "
    text += f"{secrets} secret{'s' if secrets != 1 else ''}{'; paused' if reg.paused else ''})"
    out.emit(render.webhook(reg), text)


def queue_weights(values: list[str]) -> dict[str, int]:
    """``--queue billing=3 --queue default``: queue -> weight (default 1)."""
    weights: dict[str, int] = {}
    for item in values:
        name, sep, weight = item.partition("=")
        if not name:
            raise InvalidArgument("--queue", f"{item!r} is not NAME=WEIGHT")
        weights[name] = to_int(weight, f"--queue {name}") if sep else 1  # type: ignore[assignment]
    return weights


def list_webhooks(args: Any, out: Any) -> None:
    regs = get_broker().list_webhooks()
    statuses = {s.name: s for s in WebhookStatus.objects.filter(name__in=[r.name for r in regs])}
    rows = [
        {
            "name": r.name,
            "url": r.url,
            "queues": r.queues,
            "concurrency": r.concurrency,
            "secrets": len(r.secrets or []),
            "batch_types": r.batch_types,
            "timeout": duration(r.request_timeout) if r.request_timeout is not None else None,
            "paused": r.paused,
            "breaker": statuses[r.name].breaker if r.name in statuses else None,
        }
        for r in regs
    ]
    columns = ["name", "url", "queues", "concurrency", "secrets", "batch_types", "timeout", "paused", "breaker"]
    out.table(rows, columns, {"webhooks": [render.webhook(r, statuses.get(r.name)) for r in regs]})


def act(args: Any, out: Any) -> None:
    broker = get_broker()
    if args.action == "delete":
        # Deleting is idempotent (as in the API); the message says which case it was.
        existed = exists(broker, args.name)
        broker.delete_webhook(args.name)
        text = f"deleted webhook {args.name}" if existed else f"no webhook {args.name} (nothing to delete)"
        out.emit({"name": args.name, "deleted": existed}, text)
        return
    reg = broker.set_webhook_paused(args.name, args.action == "pause")
    out.emit(render.webhook(reg), f"{'paused' if reg.paused else 'resumed'} webhook {reg.name}")


def exists(broker: Any, name: str) -> bool:
    try:
        broker.get_webhook(name)
    except NotFound:
        return False
    return True
