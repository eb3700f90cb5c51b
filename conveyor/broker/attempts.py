"""Attempt history: what each outcome records of the attempt it ends.

Every outcome of a leased task (ack, retry, archive, release, a crash, an
expired lease) records one attempt through the store, in the outcome's own
statement or transaction: who ran it (a ``Runner``), when, how it ended and
the worker's error as sent, traceback included. A task keeps its last
``ATTEMPTS_KEPT``; they are deleted with it (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from conveyor.broker.validation import scrub_text
from conveyor.conf import conveyor_settings
from conveyor.models import Task
from conveyor.sealing import ServerText
from conveyor.store import NOBODY, Attempt, Runner, Store

# An attempt keeps more of a worker's error than last_error does: its traceback.
MAX_ATTEMPT_ERROR_LENGTH = 16000


def attempt_error(error: str) -> str:
    """A worker's error as its attempt keeps it (traceback included): storable,
    at most MAX_ATTEMPT_ERROR_LENGTH, a longer one cut in the middle (a
    traceback's head says where, its tail what)."""
    text = scrub_text(error or "")
    if len(text) > MAX_ATTEMPT_ERROR_LENGTH:
        half = (MAX_ATTEMPT_ERROR_LENGTH - 3) // 2
        text = text[:half] + "\n…\n" + text[-half:]
    return ServerText(text) if isinstance(error, ServerText) else text


def ran_on(by: Runner | None, row: Any) -> Runner:
    """*by*, its node the row's lease holder when the runner names none."""
    by = by or NOBODY
    return by if by.node else Runner(by.session, by.labels, getattr(row, "lease_holder", "") or "")


def record_attempts(
    store: Store, rows: Sequence[Task], outcome: str, now: datetime, by: Runner | None, error: str = ""
) -> None:
    """Record the attempt each leased row ends with *outcome*, in the caller's
    transaction, keeping ATTEMPTS_KEPT per task."""
    kept = conveyor_settings.ATTEMPTS_KEPT
    if kept <= 0 or not rows:
        return
    text = attempt_error(error)
    store.record_attempts(
        [Attempt(r.id, r.started_at, outcome, text, ran_on(by, r), r.key_id) for r in rows], now, kept
    )
