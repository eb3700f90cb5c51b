"""``conveyor enqueue`` and ``conveyor enqueue-tx``: add tasks from the shell."""

from __future__ import annotations

import base64
import json
from typing import Any

from conveyor.api import render
from conveyor.broker import get_broker, parse, request
from conveyor.cli.common import TASK_COLUMNS, pairs, read_file, task_row, to_int, to_json, verb
from conveyor.exceptions import InvalidArgument

# Each flag's help is its field's in the request's definition (conveyor/broker/request.py).
HELP = {f.name: f.help for f in request.TASK}
# API fields whose flag is spelled differently.
FIELD_FLAGS = {
    "json": "--json-payload",
    "payload": "--payload-file",
    "retry_policy.kind": "--retry-policy",
    "retry_policy.base": "--retry-base",
    "retry_policy.cap": "--retry-cap",
    "depends_on": "--depends-on",
}


def register(subparsers: Any) -> None:
    p = verb(subparsers, "enqueue", enqueue, "enqueue one task", FIELD_FLAGS, changes=False)
    p.add_argument("type", help="task type, e.g. email:send")
    p.add_argument("--queue", default="default", help=HELP["queue"])
    p.add_argument("--id", help=HELP["id"])
    body = p.add_mutually_exclusive_group()
    body.add_argument("--json-payload", metavar="JSON", help="payload as a JSON value")
    body.add_argument("--payload-file", metavar="FILE", help="payload bytes from a file (- for stdin)")
    p.add_argument("--content-type", help=HELP["content_type"])
    p.add_argument("--priority", metavar="1-9", help=HELP["priority"])
    p.add_argument("--max-retry", metavar="N", help=HELP["max_retry"])
    p.add_argument("--process-in", metavar="DURATION", help=HELP["process_in"])
    p.add_argument("--process-at", metavar="TIME", help=HELP["process_at"])
    p.add_argument("--expires-in", metavar="DURATION", help=HELP["expires_in"])
    p.add_argument("--expires-at", metavar="TIME", help=HELP["expires_at"])
    p.add_argument("--timeout", metavar="DURATION", help=HELP["timeout"])
    p.add_argument("--deadline", metavar="TIME", help=HELP["deadline"])
    p.add_argument("--retention", metavar="DURATION", help=HELP["retention"])
    p.add_argument("--unique-key", metavar="KEY", help=HELP["unique_key"])
    p.add_argument("--unique", action="store_true", help=HELP["unique"])
    p.add_argument("--unique-ttl", metavar="DURATION", help=HELP["unique_ttl"])
    p.add_argument("--group", help=HELP["group"])
    p.add_argument("--concurrency-key", metavar="KEY", help=HELP["concurrency_key"])
    p.add_argument("--depends-on", metavar="ID", nargs="+", action="extend", help="run after these tasks (repeatable)")
    p.add_argument(
        "--on-failure",
        metavar="POLICY",
        default="block",
        help="when a dependency fails: block (default), continue or cascade_cancel",
    )
    p.add_argument(
        "--metadata", metavar="KEY=VALUE", action="append", help=HELP["metadata"] + ", KEY=VALUE (repeatable)"
    )
    p.add_argument("--retry-policy", metavar="KIND", help="exponential (default), linear or fixed")
    p.add_argument("--retry-base", metavar="DURATION", help="backoff base (default 2s)")
    p.add_argument("--retry-cap", metavar="DURATION", help="backoff cap (default 15m)")

    tx = verb(subparsers, "enqueue-tx", enqueue_tx, "enqueue tasks from a JSON file, all or none", changes=False)
    tx.add_argument("--file", required=True, metavar="FILE", help='a list of tasks or {"tasks": [...]} (- for stdin)')


def enqueue(args: Any, out: Any) -> None:
    spec = parse.parse_task(task_fields(args))
    result = get_broker().enqueue_one(spec)
    if result.error is not None:
        raise result.error
    task = result.task
    # An existing id is an idempotent success returning the stored task.
    verb = "enqueued" if result.created else "exists already:"
    out.emit(render.task(task), f"{verb} {task.id} (queue {task.queue}, type {task.type}, state {task.state})")


def task_fields(args: Any) -> dict[str, Any]:
    """The flags as a task object in the API's shape (snake_case)."""
    data: dict[str, Any] = {
        "type": args.type,
        "queue": args.queue,
        "id": args.id,
        "priority": to_int(args.priority, "--priority"),
        "max_retry": to_int(args.max_retry, "--max-retry"),
        "process_in": args.process_in,
        "process_at": args.process_at,
        "expires_in": args.expires_in,
        "expires_at": args.expires_at,
        "timeout": args.timeout,
        "deadline": args.deadline,
        "retention": args.retention,
        "unique_key": args.unique_key,
        "unique": args.unique,
        "unique_ttl": args.unique_ttl,
        "group": args.group,
        "concurrency_key": args.concurrency_key,
        "metadata": pairs(args.metadata, "--metadata") or None,
        "content_type": args.content_type,
    }
    if args.depends_on:
        data["depends_on"] = [{"task_id": tid, "on_failure": args.on_failure} for tid in args.depends_on]
    if args.retry_policy or args.retry_base or args.retry_cap:
        data["retry_policy"] = {"kind": args.retry_policy, "base": args.retry_base, "cap": args.retry_cap}
    if args.json_payload is not None:
        data["json"] = to_json(args.json_payload, "--json-payload")
    elif args.payload_file is not None:
        body = read_file(args.payload_file, "--payload-file")
        data["payload"] = base64.b64encode(body).decode()
        data["content_type"] = args.content_type or (
            "application/json" if is_json(body) else "application/octet-stream"
        )
    return {k: v for k, v in data.items() if v is not None}


def is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def enqueue_tx(args: Any, out: Any) -> None:
    items = tx_items(to_json_file(args.file))
    specs = []
    for i, item in enumerate(items):
        try:
            specs.append(parse.parse_task(item))
        except InvalidArgument as exc:
            raise InvalidArgument(exc.field, exc.reason, index=i) from None
    tasks = get_broker().enqueue_tx(specs)
    out.table([task_row(t) for t in tasks], TASK_COLUMNS, {"tasks": [render.task(t) for t in tasks]})


def to_json_file(path: str) -> Any:
    raw = read_file(path, "--file")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidArgument("--file", f"is not valid JSON ({exc})") from None


def tx_items(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):
        return data["tasks"]
    raise InvalidArgument("--file", 'must hold a list of tasks or {"tasks": [...]}')
