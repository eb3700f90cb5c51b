"""``conveyor tasks get|list|run|reschedule|cancel|delete|archive``."""

from __future__ import annotations

import json
from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker
from conveyor.cli.common import TASK_COLUMNS, group, id_results, task_row, to_int, to_seconds, to_time, verb, when
from conveyor.exceptions import InvalidArgument
from conveyor.states import State

# action -> (past tense for the output, help)
ACTIONS = {
    "run": ("made due", "make tasks due now (scheduled, pending, retry or archived)"),
    "cancel": ("canceled", "cancel waiting tasks; ask workers to abort running ones"),
    "delete": ("deleted", "delete tasks in any state but active"),
    "archive": ("archived", "move waiting or canceled tasks to the dead-letter state"),
}


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "tasks", "inspect and act on tasks")

    p = verb(verbs, "get", get, "show one task", changes=False)
    p.add_argument("id")

    p = verb(verbs, "list", list_tasks, "list tasks, newest first", changes=False)
    p.add_argument("--queue")
    p.add_argument("--state", help=", ".join(State))
    p.add_argument("--type", help="task type")
    p.add_argument("--search", help="an id, id prefix, unique key or concurrency key")
    p.add_argument("--where", help="payload.<path> = <value> / metadata.<key> = <value>, joined by 'and'")
    p.add_argument("--contains", help="a substring of the payload's text")
    p.add_argument("--limit", metavar="N", help="page size, 1-1000 (default 50)")
    p.add_argument("--page-token", metavar="TOKEN", help="the next-page token of the previous page")

    for action, (_past, text) in ACTIONS.items():
        p = verb(verbs, action, act, text)
        p.add_argument("ids", nargs="+", metavar="id", help="one id, or several for the batch form")
        p.set_defaults(action=action)

    p = verb(verbs, "reschedule", reschedule, "move waiting tasks to a new due time")
    p.add_argument("ids", nargs="+", metavar="id")
    p.add_argument("--process-in", metavar="DURATION", help="due after this delay, e.g. 30s, 5m (0 = now)")
    p.add_argument("--process-at", metavar="TIME", help="due at this RFC 3339 time")


def get(args: Any, out: Any) -> None:
    t = get_broker().get_task(args.id)
    data = render.task(t)
    pairs = [
        ("id", t.id),
        ("queue", t.queue),
        ("type", t.type),
        ("state", str(t.state)),
        ("priority", t.priority),
        ("retried", f"{t.retried} of {t.max_retry}"),
        ("enqueued", when(t.enqueued_at)),
        ("due", when(t.due_at)),
        ("started", when(t.started_at)),
        ("finished", when(t.finished_at)),
        ("expires", when(t.expires_at)),
        ("deadline", when(t.deadline)),
        ("unique key", t.unique_key),
        ("group", t.group),
        ("concurrency key", t.concurrency_key),
        ("lease holder", t.lease_holder),
        ("lease expires", when(t.lease_expires_at)),
        ("progress", f"{t.progress}% {t.progress_message}".strip() if t.progress else None),
        ("metadata", data["metadata"]),
        ("payload", show_body(data["json"], data["payload_size"], t.content_type)),
        ("result", json.dumps(data["result"]) if data["result"] is not None else None),
        ("last error", t.last_error),
    ]
    # The first rows always show; the rest only when set.
    out.details(pairs[:8] + [(k, v) for k, v in pairs[8:] if v not in (None, "", {})], data)


def show_body(value: Any, size: int, content_type: str) -> str:
    if value is not None:
        return json.dumps(value, ensure_ascii=False)
    return f"({size} bytes, {content_type})" if size else "(empty)"


def list_tasks(args: Any, out: Any) -> None:
    page = get_broker().list_tasks(
        queue=args.queue,
        state=args.state,
        type=args.type,
        search=args.search,
        where=args.where,
        contains=args.contains,
        limit=to_int(args.limit, "--limit"),
        page_token=args.page_token,
    )
    data = {"tasks": [render.task(t) for t in page.tasks], "next_page_token": page.next_page_token}
    out.table([task_row(t) for t in page.tasks], TASK_COLUMNS, data)
    if page.next_page_token:
        out.line(f"more: --page-token {page.next_page_token}")


def act(args: Any, out: Any) -> None:
    broker = get_broker()
    past = ACTIONS[args.action][0]
    if len(args.ids) > 1:
        id_results(out, getattr(broker, f"{args.action}_tasks")(args.ids), past)
        return
    task_id = args.ids[0]
    if args.action == "delete":
        broker.delete_task(task_id)
        out.emit({"id": task_id, "deleted": True}, f"deleted {task_id}")
        return
    t = getattr(broker, f"{args.action}_task")(task_id)
    if args.action == "cancel" and t.state == State.ACTIVE:
        out.emit(render.task(t), f"cancel requested for {t.id} (running; the attempt ends archived)")
        return
    out.emit(render.task(t), f"{past} {t.id} (state {t.state})")


def reschedule(args: Any, out: Any) -> None:
    if (args.process_in is None) == (args.process_at is None):
        raise InvalidArgument("--process-in", "give exactly one of --process-in and --process-at")
    when_args = {
        "process_at": to_time(args.process_at, "--process-at"),
        "process_in": to_seconds(args.process_in, "--process-in"),
    }
    broker = get_broker()
    if len(args.ids) > 1:
        id_results(out, broker.reschedule_tasks(args.ids, **when_args), "rescheduled")
        return
    t = broker.reschedule_task(args.ids[0], **when_args)
    out.emit(render.task(t), f"rescheduled {t.id} (state {t.state}, due {when(t.due_at)})")
