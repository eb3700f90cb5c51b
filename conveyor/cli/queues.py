"""``conveyor stats`` and ``conveyor queues pause|resume|policy``."""

from __future__ import annotations

from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker
from conveyor.broker.queues import POLICIES
from conveyor.cli.common import group, verb
from conveyor.states import State

# Table order: where work is, then where it ended.
STATE_COLUMNS = [
    State.PENDING,
    State.ACTIVE,
    State.SCHEDULED,
    State.RETRY,
    State.AGGREGATING,
    State.BLOCKED,
    State.COMPLETED,
    State.ARCHIVED,
    State.CANCELED,
]


def register(subparsers: Any) -> None:
    verb(subparsers, "stats", stats, "every queue with its task counts per state", changes=False)

    verbs = group(subparsers, "queues", "pause, resume and order queues")
    for action in ("pause", "resume"):
        p = verb(verbs, action, pause, f"{action} dispatch from a queue (tasks stay durable)")
        p.add_argument("queue")
        p.set_defaults(paused=action == "pause")
    p = verb(verbs, "policy", policy, "set the order tasks leave a queue in")
    p.add_argument("queue")
    p.add_argument("policy", metavar="{" + ",".join(POLICIES) + "}")


def stats(args: Any, out: Any) -> None:
    queues = get_broker().queue_stats()
    rows = []
    for q in queues:
        row: dict[str, Any] = {"queue": q.name, "paused": q.paused, "policy": q.policy}
        row.update({str(s): q.counts.get(s, 0) for s in STATE_COLUMNS})
        row["total"] = q.total
        rows.append(row)
    data = {
        "queues": [
            {
                "name": q.name,
                "paused": q.paused,
                "policy": q.policy,
                "counts": dict(q.counts),
                "total": q.total,
                "oldest_due_at": render.ts(q.oldest_due_at),
            }
            for q in queues
        ]
    }
    out.table(rows, ["queue", "paused", "policy", *map(str, STATE_COLUMNS), "total"], data)


def pause(args: Any, out: Any) -> None:
    get_broker().set_queue_paused(args.queue, args.paused)
    out.emit(
        {"queue": args.queue, "paused": args.paused}, f"{'paused' if args.paused else 'resumed'} queue {args.queue}"
    )


def policy(args: Any, out: Any) -> None:
    get_broker().set_queue_policy(args.queue, args.policy)
    out.emit({"queue": args.queue, "policy": args.policy}, f"queue {args.queue} now dispatches {args.policy}")
