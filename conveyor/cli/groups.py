"""``conveyor group set|rm|ls``: when aggregation groups fire."""

from __future__ import annotations

from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker
from conveyor.cli.common import duration, group, to_int, to_seconds, verb, when

QUEUE_DEFAULT = "(queue default)"


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "group", "aggregation group thresholds: max size, max delay, grace period")
    p = verb(verbs, "set", set_config, "set the thresholds of a group, or the queue's default (no --group)")
    p.add_argument("queue")
    p.add_argument("--group", default="", help="group name (default: every group of the queue without its own)")
    p.add_argument("--max-size", metavar="N", help="fire at this many members (default 100)")
    p.add_argument("--max-delay", metavar="DURATION", help="fire this long after the oldest member (default 1m)")
    p.add_argument("--grace", metavar="DURATION", help="fire this long after the newest member (default 10s)")
    p = verb(verbs, "rm", rm_config, "remove a group's thresholds (or the queue default)")
    p.add_argument("queue")
    p.add_argument("--group", default="")
    verb(verbs, "ls", ls, "list group thresholds and the groups aggregating now", changes=False)


def set_config(args: Any, out: Any) -> None:
    cfg = get_broker().set_group_config(
        args.queue,
        args.group,
        max_size=to_int(args.max_size, "--max-size"),
        max_delay=to_seconds(args.max_delay, "--max-delay"),
        grace=to_seconds(args.grace, "--grace"),
    )
    out.emit(
        config_json(cfg),
        f"queue {cfg.queue}, group {cfg.group or QUEUE_DEFAULT}: fire at {cfg.max_size} tasks, "
        f"after {duration(cfg.max_delay)} max delay or {duration(cfg.grace)} grace",
    )


def rm_config(args: Any, out: Any) -> None:
    broker = get_broker()
    existed = any(c.queue == args.queue and c.group == args.group for c in broker.group_configs())
    broker.delete_group_config(args.queue, args.group)
    name = f"queue {args.queue}, group {args.group or QUEUE_DEFAULT}"
    text = f"removed the thresholds of {name}" if existed else f"{name} had no thresholds of its own"
    out.emit({"queue": args.queue, "group": args.group, "removed": existed}, text)


def ls(args: Any, out: Any) -> None:
    broker = get_broker()
    configs, stats = broker.group_configs(), broker.group_stats()
    if out.as_json:
        groups = [
            {
                "queue": g.queue,
                "group": g.group,
                "count": g.count,
                "oldest": render.ts(g.oldest),
                "newest": render.ts(g.newest),
            }
            for g in stats
        ]
        out.emit({"configs": [config_json(c) for c in configs], "groups": groups}, "")
        return
    out.line("Thresholds")
    out.table(
        [
            {
                "queue": c.queue,
                "group": c.group or QUEUE_DEFAULT,
                "max_size": c.max_size,
                "max_delay": duration(c.max_delay),
                "grace": duration(c.grace),
            }
            for c in configs
        ],
        ["queue", "group", "max_size", "max_delay", "grace"],
    )
    out.line("")
    out.line("Aggregating now")
    out.table(
        [
            {"queue": g.queue, "group": g.group, "tasks": g.count, "oldest": when(g.oldest), "newest": when(g.newest)}
            for g in stats
        ],
        ["queue", "group", "tasks", "oldest", "newest"],
    )


def config_json(cfg: Any) -> dict[str, Any]:
    return {
        "queue": cfg.queue,
        "group": cfg.group,
        "max_size": cfg.max_size,
        "max_delay": cfg.max_delay,
        "grace": cfg.grace,
    }
