"""The store interface: the database contract of the hot path's task state.

The broker decides (rules, state machine, limits); a store carries out the
statements, one method per transition, for its database. ``PostgresStore``
writes them as SQL (conveyor/store/queries.sql) through psycopg's public
API; ``SqliteStore`` uses the ORM. Methods whose name starts with ``a`` are
the async twins a node runs on its event loop, over connections of its own.
What both share (the column plan, the outcome row) is here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol

from conveyor.models import Task

# Columns an outcome needs from a row (not the payload or result): what a
# completion returns, and what an outcome reads from a locked row.
OUTCOME_COLUMNS = (
    "id",
    "queue",
    "type",
    "state",
    "lease_id",
    "retried",
    "last_error",
    "retention",
    "has_dependents",
    "concurrency_key",
    "key_id",
)


@dataclass(slots=True)
class OutcomeRow:
    """The columns of an active row that completing it needs (and events show)."""

    id: str
    queue: str
    type: str
    state: str
    lease_id: str | None
    retried: int
    last_error: str
    retention: float | None
    has_dependents: bool
    concurrency_key: str | None
    key_id: str | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Runner:
    """Who ran an attempt: the worker session (a webhook gateway's key for a
    webhook delivery), its labels, and the node it was connected to."""

    session: str = ""
    labels: dict[str, Any] = field(default_factory=dict)
    node: str = ""


NOBODY = Runner()  # an outcome from no known worker (the reaper, a callback)


@dataclass(slots=True)
class Attempt:
    """One attempt to record (``Store.record_attempts``): its number is the
    store's to give (the next of its task), its error is sealed under
    *key_id* like the task's last_error."""

    task_id: str
    started_at: datetime | None
    outcome: str  # one of TaskAttempt.OUTCOMES
    error: str = ""
    by: Runner = NOBODY
    key_id: str | None = None


# The columns a lease returns, in order (the broker's ``LeasedTask``).
LEASED_FIELDS = (
    "id",
    "queue",
    "type",
    "state",
    "priority",
    "payload",
    "content_type",
    "metadata",
    "max_retry",
    "retried",
    "last_error",
    "due_at",
    "enqueued_at",
    "expires_at",
    "deadline",
    "timeout",
    "retention",
    "group",
    "concurrency_key",
    "unique_key",
    "has_dependents",
    "cancel_requested",
    "suspect",
    "lease_id",
    "lease_expires_at",
    "lease_holder",
    "started_at",
    "progress",
    "progress_message",
    "key_id",
)

# A completion's key id when the caller does not know the row's (an ack by
# id and lease id alone): the sealing store reads it. Never a key id
# (those are A-Z a-z 0-9 . _ -).
KEY_UNKNOWN = "?"
# id -> (lease id, result, the row's key id): what a completion asks for.
Wanted = dict[str, tuple[str | None, bytes | None, str | None]]

_COLUMNS: list[tuple[str, str]] = []  # (column, attname)


def task_columns() -> list[tuple[str, str]]:
    """Every concrete column of the task table with its attribute name, in field order."""
    if not _COLUMNS:
        _COLUMNS.extend((f.column, f.attname) for f in Task._meta.concrete_fields)
    return _COLUMNS


def cell(value: Any, attname: str) -> Any:
    """A task attribute as a statement's parameter (metadata as JSON text, bytes as bytes)."""
    if attname == "metadata":
        return json.dumps(value or {})
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@dataclass(slots=True)
class Resealed:
    """What one pass of re-sealing did."""

    resealed: int = 0
    last_id: str = ""  # where the next pass starts ("" when no row was looked at)
    skipped: int = 0  # active, or held by another transaction: left for a later pass
    unopened: dict[str, int] | None = None  # key id -> rows whose values this keyring cannot open


class Store(Protocol):
    """What the broker asks of a database (conveyor/store/postgres.py, sqlite.py)."""

    vendor: ClassVar[str]
    # A lone INSERT is atomic by itself: it needs no transaction around it.
    one_insert_in_autocommit: ClassVar[bool]
    # Nodes lend idle credit (conveyor_offer rows) that an INSERT can take.
    has_offers: ClassVar[bool]
    # Nodes hold a liveness lock the others can see (``dead_nodes``).
    has_liveness: ClassVar[bool]

    def insert_tasks(self, tasks: Sequence[Task]) -> None:
        """INSERT new task rows (in the caller's transaction, if any)."""

    def insert_one(self, params: dict[str, Any], *, take_offer: bool) -> tuple[Any, ...] | None:
        """INSERT one task in autocommit, durably; with *take_offer*, taking
        an offer of its queue (``insert_one_taking_offer``'s row), else None."""

    def lease(self, params: dict[str, Any], policy: str) -> list[tuple[Any, ...]] | None:
        """The one-statement lease (``lease`` in queries.sql); None: this store has none."""

    def select_due(self, due: Any, n: int, order: Sequence[str], index: str) -> list[Task]:
        """Lock and return up to *n* rows of the queryset *due* in *order*."""

    def mark_leased(self, leases: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
        """Move claimed rows to active, each under its own lease id."""

    def lock_group(self, namespace: int, key: int) -> None:
        """Serialize leasers of one group for the rest of the transaction."""

    def complete_many(
        self, wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
    ) -> list[OutcomeRow]:
        """Complete the rows still active under their own lease; return the
        winners. Each winner's attempt is recorded in the same statement or
        transaction (outcome ``completed``, its runner from *by*, else
        ``NOBODY``), keeping its task's last *kept* (0: none recorded)."""

    def record_attempts(self, attempts: Sequence[Attempt], now: datetime, kept: int) -> None:
        """Record attempts that ended at *now* (one per task), in the caller's
        transaction, each numbered after its task's last; keep each task's
        last *kept* (0: record none)."""

    def lock_leased(self, task_id: str, lease_id: str) -> Task | None:
        """The active row under this lease, locked; None if the lease is lost."""

    def lock_active(self, wanted: dict[str, str]) -> list[Task]:
        """The rows of *wanted* (id -> lease id) still active under their own lease, locked."""

    def finish(self, row: Task, fields: Sequence[str]) -> None:
        """Write the terminal transition set on *row* (archived, canceled)."""

    def retry(self, row: Task) -> None:
        """Write the retry set on *row* (state, due time, attempts, error, suspect)."""

    def release(self, ids: Sequence[str], now: datetime) -> None:
        """Give leased rows back: pending, due now, no attempt spent."""

    def requeue(self, ids: Sequence[str], now: datetime) -> None:
        """Give leased rows back where they stood in line: pending, due time kept, no attempt spent."""

    def extend(self, wanted: dict[str, str], expires: datetime) -> set[str]:
        """Push the leases of *wanted* to *expires*; the ids still leased."""

    def set_progress(self, task_id: str, lease_id: str, percent: int, message: str) -> bool:
        """Record a leased task's progress; whether the lease still held."""

    def purge(self, now: datetime, cutoff: datetime, limit: int) -> int:
        """Delete purgeable finished rows no unresolved edge points at; return how many."""

    # -- node death (docs/architecture.md, "Node death") -----------------------------

    def dead_nodes(self, alive: str) -> list[str]:
        """The nodes of the cluster table, *alive* (the caller's) aside, that
        recorded a liveness key and whose liveness lock nobody holds."""

    def withdraw_offers_of(self, holder: str) -> int:
        """Delete the open offers of node *holder*; return how many (one
        being taken is waited for: its task is then stored, leased)."""

    def leases_held_by(self, holder: str) -> list[tuple[str, str]]:
        """(id, lease id) of every active row leased to node *holder*."""

    def hand_over(self, task_id: str, lease_id: str, holder: str) -> bool:
        """Make *holder* the lease holder of the row active under this lease;
        whether the lease still held."""

    def matching(self, rows: Any, payload: Sequence[tuple[tuple[str, ...], Any]], metadata: dict[str, str],
                 contains: str) -> Any:  # fmt: skip
        """The task queryset *rows* narrowed to tasks whose plaintext JSON
        payload holds each (path, value) of *payload*, whose metadata holds
        *metadata*, and whose payload text contains *contains* (if not "").
        A payload sealed at rest (a key id) or of another content type never
        matches a payload condition (docs/search.md)."""

    # -- keys (encryption at rest, docs/encryption.md) -------------------------------

    def key_ids(self, task_ids: Sequence[str]) -> dict[str, str | None]:
        """The key id of each of these rows that exists."""

    def key_counts(self) -> dict[str, dict[str | None, int]]:
        """Rows per key id (None: plaintext), of the task, cron and attempt tables."""

    def reseal_tasks(self, key_id: str, after: str, limit: int) -> Resealed:
        """Seal up to *limit* task rows not under *key_id* anew under it, in id
        order after *after*, skipping active rows and rows another
        transaction holds; each re-sealed task's attempts go with it."""

    def reseal_cron(self, key_id: str) -> Resealed:
        """Seal every cron entry not under *key_id* anew under it."""
