"""Value objects the broker takes and returns."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.sealing import open_task
from conveyor.store.base import LEASED_FIELDS

# The sealed columns a leased task carries (not its result).
SEALED_WHEN_LEASED = ("payload", "last_error")

if TYPE_CHECKING:
    from conveyor.broker.rows import NewTask
    from conveyor.exceptions import ConveyorError
    from conveyor.models import Task


@dataclass(frozen=True)
class Dependency:
    task_id: str
    on_failure: str = "block"


@dataclass(frozen=True)
class RetrySpec:
    """A per-task retry policy; a None field falls back to the server default."""

    kind: str | None = None
    base: float | None = None
    cap: float | None = None


@dataclass(frozen=True)
class TaskSpec:
    """What a producer asks to enqueue. Validated by ``broker.validation``."""

    type: str
    payload: bytes = b""
    queue: str = "default"
    id: str | None = None
    priority: int | None = None
    max_retry: int | None = None
    process_at: datetime | None = None
    process_in: float | None = None
    expires_at: datetime | None = None
    expires_in: float | None = None
    unique_key: str | None = None
    unique_ttl: float | None = None
    unique: bool = False
    group: str | None = None
    concurrency_key: str | None = None
    depends_on: Sequence[Dependency] = ()
    timeout: float | None = None
    deadline: datetime | None = None
    retention: float | None = None
    retry_policy: RetrySpec | None = None
    metadata: Mapping[str, str] | None = None
    content_type: str = "application/json"


@dataclass
class ItemResult:
    """One item of a batch: the stored task, or the error that refused it.

    *task* is the row as stored: a ``NewTask`` record when this enqueue
    stored it (``created``), a ``Task`` read back when its id existed; both
    read alike, and ``Broker.as_model`` gives the ``Task`` of either.
    """

    index: int
    task: Task | NewTask | None = None
    error: ConveyorError | None = None
    created: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class IdResult:
    """One id of an admin batch operation."""

    id: str
    task: Task | None = None
    error: ConveyorError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class LeaseBatch:
    """What one lease call claimed, and hints for the dispatcher."""

    tasks: list[Task] = field(default_factory=list)
    # Earliest time a not-yet-due task of the queue becomes due (when the
    # call claimed fewer than asked); the dispatcher sets a timer for it.
    next_due_at: datetime | None = None
    # Why tasks were held back: "paused", "rate" or "concurrency".
    throttled: str | None = None
    # For "rate": seconds until the next token.
    retry_after: float | None = None


@dataclass
class SweepReport:
    count: int = 0
    queues: set[str] = field(default_factory=set)

    def merge(self, other: SweepReport) -> SweepReport:
        return SweepReport(self.count + other.count, self.queues | other.queues)


@dataclass(frozen=True)
class QueueStats:
    name: str
    paused: bool
    counts: Mapping[str, int]
    policy: str = "fifo"
    oldest_due_at: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class RateLimit:
    queue: str
    rate: float
    burst: int


@dataclass(frozen=True)
class ConcurrencyLimit:
    queue: str
    limit: int


@dataclass(frozen=True)
class GroupSettings:
    queue: str
    group: str
    max_size: int
    max_delay: float
    grace: float


@dataclass(frozen=True)
class GroupStat:
    queue: str
    group: str
    count: int
    oldest: datetime
    newest: datetime


@dataclass
class Page:
    tasks: list[Task]
    next_page_token: str | None


@dataclass(frozen=True)
class CronSpec:
    id: str
    spec: str
    task_type: str
    queue: str = "default"
    payload: bytes = b""
    content_type: str = "application/json"
    timezone: str = "UTC"
    options: Mapping[str, Any] = field(default_factory=dict)
    paused: bool = False


@dataclass(frozen=True)
class WebhookSpec:
    name: str
    url: str
    queues: Mapping[str, int]
    concurrency: int = 10
    secrets: Sequence[str] = ()
    batch_types: Sequence[str] = ()
    request_timeout: float | None = None
    paused: bool = False


@dataclass(slots=True)
class LeasedTask:
    """A task as a lease claimed it: what dispatch and outcomes need.

    Returned by ``lease`` and ``lease_group`` instead of model instances:
    building a model per row cost more than the lease statement itself, and
    a leased task is never saved; outcomes go through the broker by id and
    lease id.
    """

    id: str
    queue: str
    type: str
    state: str
    priority: int
    payload: bytes
    content_type: str
    metadata: dict[str, str]
    max_retry: int
    retried: int
    last_error: str
    due_at: datetime
    enqueued_at: datetime
    expires_at: datetime | None
    deadline: datetime | None
    timeout: float | None
    retention: float | None
    group: str | None
    concurrency_key: str | None
    unique_key: str | None
    has_dependents: bool
    cancel_requested: bool
    suspect: bool
    lease_id: str | None
    lease_expires_at: datetime | None
    lease_holder: str
    started_at: datetime | None
    progress: int = 0
    progress_message: str = ""
    key_id: str | None = None
    finished_at: datetime | None = None
    # Why its payload could not be opened here (conveyor/sealing.py): it is
    # then failed as an attempt, never pushed (dispatch/gateway.py).
    seal_error: str = ""

    @property
    def attempt(self) -> int:
        return self.retried + 1

    @classmethod
    def from_model(cls, task: Any) -> LeasedTask:
        """A leased model instance (opened already, by ``Task.from_db``)."""
        leased = cls(*(getattr(task, name) for name in LEASED_FIELDS))
        leased.seal_error = task.seal_error
        return leased

    @classmethod
    def from_row(cls, values: Any) -> LeasedTask:
        """A leased row as the database stores it (``LEASED_FIELDS``' values), opened."""
        leased = cls(*values)
        if isinstance(leased.metadata, str):
            leased.metadata = json.loads(leased.metadata)
        if isinstance(leased.payload, memoryview):
            leased.payload = bytes(leased.payload)
        if leased.key_id is not None:
            open_task(leased, SEALED_WHEN_LEASED)
        return leased
