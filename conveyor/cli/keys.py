"""``conveyor keys status|rotate|generate``: the keys of encryption at rest."""

from __future__ import annotations

import base64
import os
import signal
import sys
import threading
from typing import Any

from django.core.management.base import CommandError

from conveyor.broker import get_broker
from conveyor.broker.keys import RESEAL_BATCH_MAX, KeyStatus
from conveyor.cli.common import group, plain, to_float, to_int, verb
from conveyor.conf import KEY_ID
from conveyor.exceptions import InvalidArgument

BAR_WIDTH = 30


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "keys", "encryption at rest: rows per key, re-sealing under the active key")
    verb(verbs, "status", status, "how many rows each key id holds, against this keyring")
    p = verb(
        verbs, "rotate", rotate, "re-seal every row under the active key, in small batches, while the cluster runs"
    )
    p.add_argument("--batch", default="100", help=f"rows per transaction (1-{RESEAL_BATCH_MAX}, default 100)")
    p.add_argument("--pause", default="0.05", help="seconds between batches (default 0.05: room for the cluster)")
    p.add_argument("--wait", default="1", help="seconds between passes while running tasks hold rows back (default 1)")
    p.add_argument("--once", action="store_true", help="one pass over the table, then report what is left")
    p = verb(verbs, "generate", generate, "print a new random key for CONVEYOR_ENCRYPTION_KEYS")
    p.add_argument("key_id", nargs="?", default="k1", help="its id (default k1)")


def status(args: Any, out: Any) -> None:
    report = get_broker().key_status()
    rows = [
        {
            "key": k.key_id or "(plaintext)",
            "tasks": k.tasks,
            "cron": k.cron,
            "attempts": k.attempts,
            "keyring": "active" if k.active else ("yes" if k.held else ("-" if k.key_id is None else "MISSING")),
        }
        for k in report.keys
    ]
    out.table(rows, ["key", "tasks", "cron", "attempts", "keyring"], {"active": report.active, "keys": rows})
    for note in _notes(report):
        out.note(note)


def _notes(report: KeyStatus) -> list[str]:
    notes = []
    if report.active is None:
        notes.append("CONVEYOR_ENCRYPTION_KEYS is not set: new rows are stored in plaintext")
    for k in report.missing:
        notes.append(
            f"key {k.key_id} is not in this keyring but {k.tasks + k.cron + k.attempts} rows are sealed under it"
        )
    for k in report.keys:
        if k.held and not k.active and k.tasks + k.cron + k.attempts == 0:
            notes.append(f"key {k.key_id} holds no rows: it may be dropped from CONVEYOR_ENCRYPTION_KEYS")
        elif k.held and not k.active:
            notes.append(
                f"key {k.key_id} still holds {k.tasks + k.cron + k.attempts} rows: `keys rotate` moves them to {report.active}"
            )
    return notes


def rotate(args: Any, out: Any) -> None:
    batch = to_int(args.batch, "--batch")
    pause, wait = to_float(args.pause, "--pause"), to_float(args.wait, "--wait")
    if pause is None or pause < 0 or wait is None or wait < 0:
        raise InvalidArgument("--pause" if pause is None or pause < 0 else "--wait", "must be 0 or more seconds")
    broker = get_broker()
    before = broker.key_status()
    if before.active is None:
        raise CommandError("CONVEYOR_ENCRYPTION_KEYS is not set: there is no key to seal under (docs/encryption.md)")
    stop = _stop_on_signals()
    progress = Progress(out, before.to_reseal, before.active)
    cron = broker.reseal_cron()
    progress.unopened(cron.unopened or {})
    while not stop.is_set():
        skipped = _one_pass(broker, batch or 0, pause, stop, progress)
        if args.once or stop.is_set() or not skipped:
            break
        progress.waiting(skipped)
        stop.wait(wait)
    progress.finish(cron.resealed)
    after = broker.key_status()
    left = after.to_reseal
    out.emit(
        {"active": after.active, "resealed": progress.done, "cron_resealed": cron.resealed, "left": left,
         "unopened": progress.unopened_rows, "interrupted": stop.is_set()},
        f"resealed {progress.done} task rows and {cron.resealed} cron entries under {after.active}; {left} rows left",
    )  # fmt: skip
    if progress.unopened_rows:
        keys = ", ".join(f"{k}: {n}" for k, n in sorted(progress.unopened_rows.items()))
        raise CommandError(f"rows this keyring cannot open were left as they are ({keys}); add their key and run again")
    if stop.is_set():
        raise CommandError("interrupted: what is done is committed; run `keys rotate` again to go on")
    if left and not args.once:
        raise CommandError(f"{left} rows are still under other keys (a node still sealing under one?): run again")


def _one_pass(broker: Any, batch: int, pause: float, stop: threading.Event, progress: Progress) -> int:
    """One walk over the table in id order; the rows passed over (active, or held by another transaction)."""
    after, skipped = "", 0
    while not stop.is_set():
        step = broker.reseal_step(after, batch)
        if not step.last_id:
            break
        after, skipped = step.last_id, skipped + step.skipped
        progress.step(step.resealed)
        progress.unopened(step.unopened or {})
        if pause:
            stop.wait(pause)
    return skipped


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    return stop


class Progress:
    """A bar on a terminal's stderr; a line per 10% elsewhere; nothing with --json."""

    def __init__(self, out: Any, total: int, active: str) -> None:
        self.out, self.total, self.done = out, max(total, 1), 0
        self.unopened_rows: dict[str, int] = {}
        self.tty = not out.as_json and hasattr(out.stderr, "isatty") and out.stderr.isatty()
        self._shown = -1
        out.note(f"re-sealing {total} task rows under {active}")

    def step(self, resealed: int) -> None:
        self.done += resealed
        self._show()

    def unopened(self, counts: dict[str, int]) -> None:
        for key_id, n in counts.items():
            self.unopened_rows[key_id or "(plaintext)"] = self.unopened_rows.get(key_id or "(plaintext)", 0) + n

    def waiting(self, skipped: int) -> None:
        self.out.note(f"{skipped} rows are held by running tasks (or other transactions): another pass")

    def _show(self) -> None:
        share = min(1.0, self.done / self.total)
        if self.tty:
            filled = int(share * BAR_WIDTH)
            bar = f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total}"
            self.out.stderr.write(bar, ending="", style_func=plain)
            self.out.stderr.flush()
        elif not self.out.as_json and int(share * 10) > self._shown:
            self._shown = int(share * 10)
            self.out.note(f"{self.done}/{self.total} rows re-sealed")

    def finish(self, cron: int) -> None:
        if self.tty:
            self.out.stderr.write("")


def generate(args: Any, out: Any) -> None:
    if not KEY_ID.match(args.key_id):
        raise InvalidArgument("key_id", "must be 1-64 of A-Z a-z 0-9 . _ -")
    secret = base64.b64encode(os.urandom(32)).decode()
    out.emit({"key_id": args.key_id, "key": f"{args.key_id}:{secret}"}, f"{args.key_id}:{secret}")
    if sys.stdout.isatty():
        out.note("put it first in CONVEYOR_ENCRYPTION_KEYS (comma-separated) on every node; keep it secret")
