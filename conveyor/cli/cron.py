"""``conveyor cron add|list|pause|resume|delete``: stored schedules."""

from __future__ import annotations

import json
from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker, parse
from conveyor.broker.cron import CRON_OPTIONS
from conveyor.cli.common import group, pairs, to_json, verb, when
from conveyor.exceptions import NotFound

# Options given as durations on the command line, stored as seconds.
DURATION_OPTIONS = ("timeout", "retention", "expires_in", "unique_ttl")


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "cron", "cron entries: tasks enqueued on a schedule")
    p = verb(verbs, "add", add, "create or replace a cron entry", {"json": "--json-payload", "options": "--option"})
    p.add_argument("id", help="entry id, e.g. nightly-report")
    p.add_argument("spec", help='"*/5 * * * *" (5 fields), 6 fields with seconds first, or @hourly, @daily, ...')
    p.add_argument("task_type", help="type of the task each run enqueues")
    p.add_argument("--queue", default="default")
    p.add_argument("--json-payload", metavar="JSON", help="payload of every run, as a JSON value")
    p.add_argument("--timezone", default="UTC", help="IANA zone the spec is read in (default UTC)")
    p.add_argument("--paused", action="store_true", help="create it paused")
    p.add_argument(
        "--option",
        metavar="KEY=VALUE",
        action="append",
        help=f"task option, repeatable: {', '.join(CRON_OPTIONS)} (durations as 30s, 5m; metadata as JSON)",
    )
    verb(verbs, "list", list_entries, "list cron entries", changes=False)
    for action in ("pause", "resume", "delete"):
        p = verb(verbs, action, act, f"{action} a cron entry")
        p.add_argument("id")
        p.set_defaults(action=action)


def add(args: Any, out: Any) -> None:
    data: dict[str, Any] = {
        "spec": args.spec,
        "task_type": args.task_type,
        "queue": args.queue,
        "timezone": args.timezone,
        "paused": args.paused,
        "options": options(args.option),
    }
    if args.json_payload is not None:
        data["json"] = to_json(args.json_payload, "--json-payload")
    entry = get_broker().upsert_cron_entry(parse.parse_cron(data, args.id))
    state = "paused" if entry.paused else f"next run {when(entry.next_run_at)} UTC"
    out.emit(
        render.cron_entry(entry),
        f"cron entry {entry.id}: {entry.task_type} on {entry.queue} at {entry.spec!r} ({state})",
    )


def options(values: list[str] | None) -> dict[str, Any]:
    """``--option k=v``: durations in seconds, JSON values parsed, anything else a string."""
    out: dict[str, Any] = {}
    for key, raw in pairs(values, "--option").items():
        if key in DURATION_OPTIONS:
            out[key] = parse.parse_seconds(raw, f"--option {key}")
            continue
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def list_entries(args: Any, out: Any) -> None:
    entries = get_broker().list_cron_entries()
    rows = [
        {
            "id": e.id,
            "spec": e.spec,
            "timezone": e.timezone,
            "task_type": e.task_type,
            "queue": e.queue,
            "paused": e.paused,
            "next_run": None if e.paused else when(e.next_run_at),
            "last_run": when(e.last_run_at),
        }
        for e in entries
    ]
    columns = ["id", "spec", "timezone", "task_type", "queue", "paused", "next_run", "last_run"]
    out.table(rows, columns, {"entries": [render.cron_entry(e) for e in entries]})


def act(args: Any, out: Any) -> None:
    broker = get_broker()
    if args.action == "delete":
        # Deleting is idempotent (as in the API); the message says which case it was.
        existed = exists(broker, args.id)
        broker.delete_cron_entry(args.id)
        text = f"deleted cron entry {args.id}" if existed else f"no cron entry {args.id} (nothing to delete)"
        out.emit({"id": args.id, "deleted": existed}, text)
        return
    entry = broker.set_cron_paused(args.id, args.action == "pause")
    text = (
        f"paused cron entry {entry.id}"
        if entry.paused
        else f"resumed cron entry {entry.id} (next run {when(entry.next_run_at)} UTC)"
    )
    out.emit(render.cron_entry(entry), text)


def exists(broker: Any, entry_id: str) -> bool:
    try:
        broker.get_cron_entry(entry_id)
    except NotFound:
        return False
    return True
