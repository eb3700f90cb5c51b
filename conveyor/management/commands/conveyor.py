"""``manage.py conveyor <group> <verb>``: operate Conveyor from the shell."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from conveyor.cli import register_all
from conveyor.cli.common import plain
from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError, InvalidArgument


class Output:
    """Human tables by default; one JSON document per result with --json.

    Notes and warnings go to stderr in both modes, so ``--json`` output
    stays parseable.
    """

    def __init__(self, stdout: Any, as_json: bool, stderr: Any = None) -> None:
        self.stdout = stdout
        self.stderr = stderr if stderr is not None else stdout
        self.as_json = as_json

    def emit(self, data: Any, text: str) -> None:
        self.stdout.write(dumps(data) if self.as_json else text)

    def line(self, text: str) -> None:
        if not self.as_json:
            self.stdout.write(text)

    def note(self, text: str) -> None:
        """A warning, hint or progress line for the operator (stderr, in both
        modes; plain, not in the red Django gives errors on a terminal)."""
        self.stderr.write(text, style_func=plain)

    def stream(self, data: Any, text: str) -> None:
        """One line of a live stream, flushed at once."""
        self.emit(data, text)
        self.stdout.flush()

    def details(self, pairs: list[tuple[str, Any]], data: Any) -> None:
        """``key  value`` lines, keys aligned; the raw *data* with --json."""
        if self.as_json:
            self.stdout.write(dumps(data))
            return
        width = max(len(key) for key, _ in pairs)
        for key, value in pairs:
            self.stdout.write(f"{key.ljust(width)}  {_cell(value)}".rstrip())

    def table(self, rows: list[dict[str, Any]], columns: list[str], data: Any = None) -> None:
        if self.as_json:
            self.stdout.write(dumps(data if data is not None else rows))
            return
        if not rows:
            self.stdout.write("(none)")
            return
        cells = [[_cell(row.get(c)) for c in columns] for row in rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        self.stdout.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
        for r in cells:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def dumps(data: Any) -> str:
    return json.dumps(data, default=str)


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "-"
    return " ".join(str(value).splitlines())


class Command(BaseCommand):
    help = (
        "Operate Conveyor: enqueue, tasks, stats, queues, limits, groups, cron, webhooks, cluster, events, sweep, "
        "tokens, keys."
    )
    # The CLI talks to the database only; URL, admin and template checks are
    # `manage.py check`'s business and must not stop an operator mid-incident.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")
        groups = parser.add_subparsers(dest="group", metavar="<group>", required=True, parser_class=type(parser))
        register_all(groups)

    def handle(self, *args: Any, **options: Any) -> None:
        handler = options.get("handler")
        if handler is None:
            raise CommandError("missing verb; see --help")
        try:
            read_only = conveyor_settings.READ_ONLY  # every setting is read (and checked) here
        except ValueError as exc:
            # As the node refuses to start on it: one line, no traceback.
            raise CommandError(one_line(f"invalid CONVEYOR setting: {exc}")) from None
        if options.get("changes") and read_only:
            # The verb's parser's prog: "manage.py conveyor tasks cancel" (from the shell).
            words = options["verb_parser"].prog.split()
            command = " ".join(["conveyor", *words[words.index("conveyor") + 1 :]] if "conveyor" in words else words)
            raise CommandError(
                f"refused: read-only mode (CONVEYOR_READ_ONLY) allows no `{command}`; nothing was changed"
            )
        out = Output(self.stdout, options["as_json"], self.stderr)
        namespace = _Namespace(options)
        try:
            handler(namespace, out)
        except InvalidArgument as exc:
            raise CommandError(
                one_line(flag_message(exc, options.get("verb_parser"), options.get("field_flags")))
            ) from None
        except ConveyorError as exc:
            raise CommandError(one_line(exc.message)) from None
        except DatabaseError as exc:
            # Most often an unmigrated database: say so in one line, no traceback.
            raise CommandError(one_line(f"database error: {exc} (is DATABASE_URL right, and migrated?)")) from None
        except BrokenPipeError:
            sys.exit(0)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def flag_message(exc: InvalidArgument, parser: Any, aliases: dict[str, str] | None) -> str:
    """Name the command-line flag the user typed instead of the API field.

    ``process_in: invalid duration`` becomes ``--process-in: invalid
    duration`` when the verb has that flag; *aliases* maps fields whose flag
    is spelled differently (``limit`` -> ``--max``). Errors about one item of
    a file, or fields with no flag, keep the field name.
    """
    field = exc.field
    if not field or exc.index is not None or parser is None:
        return exc.message
    flags = {s for action in parser._actions for s in action.option_strings}
    aliases = aliases or {}
    if field in aliases:
        name = aliases[field]
    else:
        head = field.split(".")[0].split("[")[0]
        flag = aliases.get(head) or "--" + head.replace("_", "-")
        if flag not in flags:
            return exc.message
        rest = field[len(head) :]
        # metadata.region -> "--metadata region"; depends_on[0] -> "--depends-on[0]"
        name = flag + (" " + rest[1:] if rest.startswith(".") else rest)
    return f"{name}: {exc.reason}"


class _Namespace:
    def __init__(self, options: dict[str, Any]) -> None:
        self.__dict__.update(options)
