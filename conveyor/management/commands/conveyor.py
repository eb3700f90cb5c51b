"""``manage.py conveyor <group> <verb>``: operate Conveyor from the shell."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conveyor.cli import register_all
from conveyor.exceptions import ConveyorError


class Output:
    """Human tables by default; one JSON document per result with --json."""

    def __init__(self, stdout: Any, as_json: bool) -> None:
        self.stdout = stdout
        self.as_json = as_json

    def emit(self, data: Any, text: str) -> None:
        self.stdout.write(json.dumps(data, default=str) if self.as_json else text)

    def line(self, text: str) -> None:
        if not self.as_json:
            self.stdout.write(text)

    def table(self, rows: list[dict[str, Any]], columns: list[str], data: Any = None) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(data if data is not None else rows, default=str))
            return
        if not rows:
            self.stdout.write("(none)")
            return
        cells = [[_cell(row.get(c)) for c in columns] for row in rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        self.stdout.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for r in cells:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class Command(BaseCommand):
    help = "Operate Conveyor: tasks, queues, limits, groups, cron, webhooks, cluster, events, sweep."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")
        groups = parser.add_subparsers(dest="group", metavar="<group>", required=True, parser_class=type(parser))
        register_all(groups)

    def handle(self, *args: Any, **options: Any) -> None:
        handler = options.get("handler")
        if handler is None:
            raise CommandError("missing verb; see --help")
        out = Output(self.stdout, options["as_json"])
        namespace = _Namespace(options)
        try:
            handler(namespace, out)
        except ConveyorError as exc:
            raise CommandError(exc.message) from None
        except BrokenPipeError:
            sys.exit(0)


class _Namespace:
    def __init__(self, options: dict[str, Any]) -> None:
        self.__dict__.update(options)
