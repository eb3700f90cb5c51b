"""Helpers every CLI group shares: verb parsers, value parsing, rendering."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import CommandError

from conveyor.api.errors import error_body
from conveyor.api.render import task as task_json
from conveyor.broker import parse
from conveyor.exceptions import InvalidArgument

Handler = Callable[[Any, Any], None]


def group(subparsers: Any, name: str, help: str) -> Any:
    """A command group whose verbs are added with :func:`verb`."""
    parser = subparsers.add_parser(name, help=help, description=help)
    return parser.add_subparsers(dest="verb", metavar="<verb>", required=True)


def verb(
    subparsers: Any,
    name: str,
    handler: Handler,
    help: str,
    field_flags: dict[str, str] | None = None,
    *,
    changes: bool = True,
) -> Any:
    """A verb parser: ``--json`` is accepted here too, errors name its flags.

    A verb *changes* something unless it says otherwise: read-only mode
    refuses it (``changes=False``: reads, and enqueues, which producers keep
    doing in read-only mode as on the API).
    """
    parser = subparsers.add_parser(name, help=help, description=help)
    parser.add_argument(
        "--json", action="store_true", dest="as_json", default=argparse.SUPPRESS, help="machine-readable output"
    )
    parser.set_defaults(handler=handler, verb_parser=parser, field_flags=field_flags or {}, changes=changes)
    return parser


# -- values typed on the command line ----------------------------------------------
# Parsed in handlers rather than by argparse types, so a bad value is one
# line naming its flag (argparse would print the whole usage).


def to_int(value: str | None, flag: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument(flag, f"{value!r} is not an integer") from None


def to_float(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise InvalidArgument(flag, f"{value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidArgument(flag, "must be a finite number")
    return number


def to_seconds(value: str | None, flag: str) -> float | None:
    """``30s``, ``5m``, ``1h30m``, ``7d`` or plain seconds."""
    return parse.parse_seconds(value, flag)


def to_time(value: str | None, flag: str) -> datetime | None:
    """An RFC 3339 timestamp with a zone, e.g. ``2026-07-09T13:00:00Z``."""
    return parse.parse_time(value, flag)


def to_json(value: str, flag: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise InvalidArgument(flag, f"is not valid JSON ({exc})") from None


def pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    """``k=v`` arguments (repeatable flag) as a dict."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgument(flag, f"{item!r} is not key=value")
        out[key] = value
    return out


def read_file(path: str, flag: str) -> bytes:
    """The bytes of *path* (``-`` is stdin)."""
    import sys

    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InvalidArgument(flag, f"cannot read {path}: {exc.strerror or exc}") from None


# -- rendering --------------------------------------------------------------------


def when(value: datetime | None) -> str | None:
    """A timestamp for a table cell: UTC, to the second."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str | None:
    """Seconds as an operator reads them: ``90`` -> ``1m30s``, ``0.5`` -> ``0.5s``."""
    if seconds is None:
        return None
    if seconds != int(seconds) or seconds < 60:
        return f"{seconds:g}s"
    parts, rest = [], int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def clip(text: str | None, width: int = 60) -> str | None:
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def task_row(t: Any) -> dict[str, Any]:
    return {
        "id": t.id,
        "queue": t.queue,
        "type": t.type,
        "state": str(t.state),
        "priority": t.priority,
        "retried": f"{t.retried}/{t.max_retry}",
        "due": when(t.due_at),
        "error": clip(t.last_error),
    }


TASK_COLUMNS = ["id", "queue", "type", "state", "priority", "retried", "due", "error"]


def id_results(out: Any, results: list[Any], verb_past: str) -> None:
    """Per-id results of a batch action; exit non-zero when any id failed."""
    data = []
    rows = []
    for r in results:
        item: dict[str, Any] = {"id": r.id, "ok": r.ok}
        if r.task is not None:
            item["task"] = task_json(r.task)
        if r.error is not None:
            item["error"] = error_body(r.error)
        data.append(item)
        rows.append(
            {
                "id": r.id,
                "result": verb_past if r.ok else r.error.code,
                "state": str(r.task.state) if r.task is not None else None,
                "error": r.error.message if r.error is not None else None,
            }
        )
    out.table(rows, ["id", "result", "state", "error"], {"results": data})
    failed = sum(not r.ok for r in results)
    if failed:
        raise CommandError(f"{failed} of {len(results)} ids failed")


def plain(text: str) -> str:
    """A style for Django's ``OutputWrapper.write``: the text as it is (no colour)."""
    return text
