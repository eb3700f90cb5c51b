"""``conveyor ratelimit set|rm|ls`` and ``conveyor concurrency set|rm|ls``."""

from __future__ import annotations

from typing import Any

from conveyor.broker import get_broker
from conveyor.cli.common import group, to_float, to_int, verb


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "ratelimit", "per-queue rate limits (a token bucket shared by all nodes)")
    p = verb(verbs, "set", set_rate, "limit a queue to RATE tasks per second")
    p.add_argument("queue")
    p.add_argument("--rate", required=True, help="tasks per second, e.g. 5 or 0.5")
    p.add_argument("--burst", default="1", help="bucket size: tasks allowed at once after a quiet spell (default 1)")
    p = verb(verbs, "rm", rm_rate, "remove a queue's rate limit")
    p.add_argument("queue")
    verb(verbs, "ls", ls_rate, "list rate limits", changes=False)

    verbs = group(subparsers, "concurrency", "per-key concurrency limits: at most N active tasks per key in a queue")
    p = verb(verbs, "set", set_concurrency, "allow at most MAX active tasks per concurrency key", {"limit": "--max"})
    p.add_argument("queue")
    p.add_argument("--max", required=True, help="active tasks per key")
    p = verb(verbs, "rm", rm_concurrency, "remove a queue's concurrency limit (its keys go unbounded)")
    p.add_argument("queue")
    verb(verbs, "ls", ls_concurrency, "list concurrency limits", changes=False)


def set_rate(args: Any, out: Any) -> None:
    limit = get_broker().set_rate_limit(args.queue, to_float(args.rate, "--rate"), to_int(args.burst, "--burst"))  # type: ignore[arg-type]
    out.emit(
        {"queue": limit.queue, "rate": limit.rate, "burst": limit.burst},
        f"queue {limit.queue}: at most {limit.rate:g} tasks/s, burst {limit.burst}",
    )


def rm_rate(args: Any, out: Any) -> None:
    broker = get_broker()
    existed = broker.rate_limit(args.queue) is not None
    broker.delete_rate_limit(args.queue)
    text = f"removed the rate limit of queue {args.queue}" if existed else f"queue {args.queue} had no rate limit"
    out.emit({"queue": args.queue, "removed": existed}, text)


def ls_rate(args: Any, out: Any) -> None:
    limits = get_broker().rate_limits()
    out.table(
        [{"queue": r.queue, "rate": f"{r.rate:g}/s", "burst": r.burst} for r in limits],
        ["queue", "rate", "burst"],
        {"rate_limits": [{"queue": r.queue, "rate": r.rate, "burst": r.burst} for r in limits]},
    )


def set_concurrency(args: Any, out: Any) -> None:
    limit = get_broker().set_concurrency_limit(args.queue, to_int(args.max, "--max"))  # type: ignore[arg-type]
    out.emit(
        {"queue": limit.queue, "limit": limit.limit},
        f"queue {limit.queue}: at most {limit.limit} active tasks per concurrency key",
    )


def rm_concurrency(args: Any, out: Any) -> None:
    broker = get_broker()
    existed = broker.concurrency_limit(args.queue) is not None
    broker.delete_concurrency_limit(args.queue)
    text = (
        f"removed the concurrency limit of queue {args.queue}"
        if existed
        else f"queue {args.queue} had no concurrency limit"
    )
    out.emit({"queue": args.queue, "removed": existed}, text)


def ls_concurrency(args: Any, out: Any) -> None:
    limits = get_broker().concurrency_limits()
    out.table(
        [{"queue": c.queue, "max": c.limit} for c in limits],
        ["queue", "max"],
        {"concurrency_limits": [{"queue": c.queue, "limit": c.limit} for c in limits]},
    )
