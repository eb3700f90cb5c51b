"""``conveyor events``: follow the live lifecycle events, one line each.

Nodes publish events in batches to the channel-layer group
``conveyor.events``; this joins the group like the SSE endpoint does. Only a
shared (Redis) layer carries other processes' events: with the in-memory
layer the command can only hear itself, so it says so and listens anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.management.base import CommandError

from conveyor.api.events import EventFilter
from conveyor.cli.common import to_int, to_seconds, verb
from conveyor.events import KINDS
from conveyor.exceptions import InvalidArgument
from conveyor.notify.groups import EVENTS_GROUP

IN_MEMORY_NOTE = (
    "note: the channel layer is in-memory, so only this process's events can arrive; "
    "set REDIS_URL (the nodes' Redis) to follow the cluster"
)


def register(subparsers: Any) -> None:
    p = verb(
        subparsers, "events", events, "follow live task events until Ctrl-C (needs the nodes' Redis)", changes=False
    )
    p.add_argument("--queue", action="append", help="only these queues (repeatable, or comma-separated)")
    p.add_argument("--type", action="append", help="only these task types (repeatable, or comma-separated)")
    p.add_argument("--kind", action="append", help=f"only these events (repeatable): {', '.join(KINDS)}")
    p.add_argument("--count", metavar="N", help="exit after N events")
    p.add_argument("--timeout", metavar="DURATION", help="exit after this long, e.g. 30s")


def events(args: Any, out: Any) -> None:
    select = selector(args.queue, args.type, args.kind)
    count = to_int(args.count, "--count")
    if count is not None and count < 1:
        raise InvalidArgument("--count", "must be at least 1")
    timeout = to_seconds(args.timeout, "--timeout")
    layer = get_channel_layer()
    if layer is None:
        raise CommandError("no channel layer is configured (CHANNEL_LAYERS)")
    if isinstance(layer, InMemoryChannelLayer):
        out.note(IN_MEMORY_NOTE)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way out
        asyncio.run(follow(layer, select, out, count, timeout))


def selector(queues: list[str] | None, types: list[str] | None, kinds: list[str] | None) -> Any:
    def split(values: list[str] | None) -> list[str]:
        return [v for raw in values or [] for v in raw.split(",") if v]

    wanted = set(split(kinds))
    unknown = sorted(wanted - set(KINDS))
    if unknown:
        raise InvalidArgument("--kind", f"unknown event {unknown[0]!r} (one of {', '.join(KINDS)})")
    by_queue_type = EventFilter(split(queues), split(types))

    def select(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in by_queue_type.select(events) if not wanted or e.get("kind") in wanted]

    return select


async def follow(layer: Any, select: Any, out: Any, count: int | None, timeout: float | None) -> None:
    channel = await layer.new_channel()
    await layer.group_add(EVENTS_GROUP, channel)
    seen = 0
    try:
        async with asyncio.timeout(timeout):
            while count is None or seen < count:
                message = await layer.receive(channel)
                for event in select(message.get("events", [])):
                    out.stream(event, event_line(event))
                    seen += 1
                    if seen == count:
                        break
    except TimeoutError:
        pass
    finally:
        await layer.group_discard(EVENTS_GROUP, channel)


def event_line(e: dict[str, Any]) -> str:
    at = str(e.get("at", "")).replace("T", " ").replace("Z", "")[:19]
    line = f"{at}  {e.get('kind', ''):<9}  {e.get('task_id', '')}  queue={e.get('queue')} type={e.get('type')}"
    line += f" state={e.get('state')} attempt={e.get('attempt')}"
    if e.get("last_error"):
        line += f" error={' '.join(str(e['last_error']).split())[:200]}"
    return line
