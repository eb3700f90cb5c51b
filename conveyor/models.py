"""Conveyor's tables. Models stay thin: fields, indexes, constraints.

Every change to a task row goes through ``conveyor.broker``; nothing else
writes ``Task`` or ``TaskDependency``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from conveyor.sealing import CRON_PAYLOAD, TASK_COLUMNS, open_attempt, open_task, open_value
from conveyor.states import INCOMPLETE, LEASABLE, WAITING, State

STATE_CHOICES = [(s.value, s.value) for s in State]
POLICY_CHOICES = [("fifo", "fifo"), ("lifo", "lifo"), ("random", "random")]
ON_FAILURE_CHOICES = [("block", "block"), ("continue", "continue"), ("cascade_cancel", "cascade_cancel")]


class TaskQuerySet(models.QuerySet):
    """Side-effect-free filters used by the broker and the admin."""

    def in_queue(self, queue: str) -> TaskQuerySet:
        return self.filter(queue=queue)

    def due(self, now) -> TaskQuerySet:  # type: ignore[no-untyped-def]
        """Leasable now: pending or retry, due, not past its pre-dispatch expiry."""
        return self.filter(state__among=LEASABLE, due_at__lte=now).exclude(expires_at__lte=now)

    def waiting(self) -> TaskQuerySet:
        return self.filter(state__in=WAITING)


class Task(models.Model):
    id = models.CharField(max_length=100, primary_key=True)
    queue = models.CharField(max_length=100)
    type = models.CharField(max_length=200)
    state = models.CharField(max_length=12, choices=STATE_CHOICES)
    priority = models.PositiveSmallIntegerField(default=4)
    payload = models.BinaryField(default=b"")
    content_type = models.CharField(max_length=100, default="application/json")
    metadata = models.JSONField(default=dict, blank=True)
    result = models.BinaryField(null=True, blank=True)

    max_retry = models.PositiveIntegerField(default=25)
    retried = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # Per-task retry policy; null fields fall back to the server defaults.
    retry_kind = models.CharField(max_length=12, blank=True, default="")
    retry_base = models.FloatField(null=True, blank=True)
    retry_cap = models.FloatField(null=True, blank=True)

    # When the task is due: its process_at, or the time a retry may run.
    due_at = models.DateTimeField()
    enqueued_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Pre-dispatch expiry: a waiting task past it is archived, never leased.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Running limits: absolute deadline, and seconds per attempt.
    deadline = models.DateTimeField(null=True, blank=True)
    timeout = models.FloatField(null=True, blank=True)
    # How long a completed row is kept (seconds); null = server default.
    retention = models.FloatField(null=True, blank=True)

    unique_key = models.CharField(max_length=255, null=True, blank=True)
    unique_until = models.DateTimeField(null=True, blank=True)
    group = models.CharField(max_length=200, null=True, blank=True)
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)

    lease_id = models.CharField(max_length=64, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_holder = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    purge_at = models.DateTimeField(null=True, blank=True)
    progress = models.PositiveSmallIntegerField(default=0)
    progress_message = models.CharField(max_length=500, blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    # In flight when a worker's connection dropped (crash attribution,
    # docs/architecture.md "Crashed workers"): from then on dispatched only
    # to a worker that holds no other suspect, so a crash names its cause.
    suspect = models.BooleanField(default=False, db_default=False)  # db_default: older nodes insert without it
    # Set when some task depends on this one, so completion knows to resolve.
    has_dependents = models.BooleanField(default=False)
    # The key the row's payload, result and error text are sealed under
    # (conveyor/sealing.py); NULL: they are stored in plaintext.
    key_id = models.CharField(max_length=64, null=True, blank=True)

    objects = TaskQuerySet.as_manager()
    # Why a sealed value of this row could not be opened here (then it reads empty).
    seal_error = ""

    class Meta:
        indexes = [
            # The lease query (fifo) is an index scan over due rows only.
            models.Index(
                fields=["queue", "-priority", "due_at", "id"],
                condition=Q(state__in=LEASABLE),
                name="task_lease_fifo",
            ),
            models.Index(
                fields=["queue", "-priority", "-due_at", "-id"],
                condition=Q(state__in=LEASABLE),
                name="task_lease_lifo",
            ),
            # Earliest future retry per queue (the dispatcher's retry timer).
            # Only retry rows: an index over every leasable row by due time
            # tempts the planner to read and sort all due rows on each lease.
            models.Index(fields=["queue", "due_at"], condition=Q(state=State.RETRY), name="task_retry_due"),
            models.Index(fields=["due_at"], condition=Q(state=State.SCHEDULED), name="task_scheduled"),
            models.Index(fields=["lease_expires_at"], condition=Q(state=State.ACTIVE), name="task_lease_expiry"),
            models.Index(
                fields=["queue", "concurrency_key"],
                condition=Q(state=State.ACTIVE) & Q(concurrency_key__isnull=False),
                name="task_active_key",
            ),
            models.Index(
                fields=["queue", "group", "enqueued_at", "id"],
                condition=Q(state=State.AGGREGATING),
                name="task_group",
            ),
            models.Index(
                fields=["expires_at"], condition=Q(state__in=WAITING, expires_at__isnull=False), name="task_expiry"
            ),
            models.Index(fields=["purge_at"], condition=Q(state=State.COMPLETED), name="task_purge_completed"),
            models.Index(
                fields=["finished_at"],
                condition=Q(state__in=[State.ARCHIVED, State.CANCELED]),
                name="task_purge_failed",
            ),
            models.Index(fields=["queue", "state", "id"], name="task_list"),
            models.Index(fields=["state", "id"], name="task_list_state"),
        ]
        constraints = [
            # A unique key is claimed while its holder is incomplete. Lapsed
            # TTL claims are cleared (unique_key set to NULL) before insert.
            models.UniqueConstraint(
                fields=["unique_key"],
                condition=Q(state__in=INCOMPLETE) & Q(unique_key__isnull=False),
                name="task_unique_live_key",
            ),
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=9), name="task_priority_range"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id} ({self.state})"

    @classmethod
    def register_lookups(cls) -> None:
        from conveyor.lookups import register

        register(cls._meta.get_field("state"))

    @property
    def attempt(self) -> int:
        return self.retried + 1

    @classmethod
    def from_db(cls, db, field_names, values, **kwargs):  # type: ignore[no-untyped-def]
        """A row read through the ORM, its sealed columns opened (conveyor/sealing.py)."""
        task = super().from_db(db, field_names, values, **kwargs)
        loaded = task.__dict__
        if loaded.get("key_id") is not None:
            open_task(task, loaded)
        elif "key_id" not in loaded and not loaded.keys().isdisjoint(TASK_COLUMNS):
            # Whether the values are sealed is the row's key id: never guess.
            raise TypeError("a Task read with its payload, result or last_error must be read with key_id too")
        return task

    @classmethod
    def from_plaintext(cls, db: str, values: list[object]) -> Task:
        """An instance of a row's values in field order that were not read
        from the database (a new row, its values in plaintext): ``from_db``
        without the opening."""
        return super().from_db(db, None, values)  # type: ignore[no-any-return]


class TaskAttempt(models.Model):
    """One attempt of a task: who ran it, when, and how it ended (the last
    ``ATTEMPTS_KEPT`` per task; deleted with its task by the database)."""

    OUTCOMES = ("completed", "retry", "failed", "released", "crashed", "lease-expired")

    # ON DELETE CASCADE in the database: the store purges tasks with plain
    # DELETEs. No index of its own: the unique (task, number) one leads with it.
    task = models.ForeignKey(Task, on_delete=models.DB_CASCADE, related_name="attempts", db_index=False)
    # The attempt's place in the task's history (1 first); a release or a
    # crash not charged is listed too, so it can run ahead of ``Task.attempt``.
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField()
    worker_session = models.CharField(max_length=200, blank=True, default="")
    worker_labels = models.JSONField(default=dict, blank=True)
    node = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(max_length=16)
    # The worker's error text (traceback included), sealed like the task's
    # last_error under ``key_id`` (conveyor/sealing.py, ATTEMPT_ERROR).
    error = models.TextField(blank=True, default="")
    key_id = models.CharField(max_length=64, null=True, blank=True)

    seal_error = ""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="attempt_number_unique")]

    def __str__(self) -> str:
        return f"{self.task_id} #{self.number} ({self.outcome})"

    @classmethod
    def from_db(cls, db, field_names, values, **kwargs):  # type: ignore[no-untyped-def]
        """A row read through the ORM, its error text opened (conveyor/sealing.py)."""
        attempt = super().from_db(db, field_names, values, **kwargs)
        if attempt.__dict__.get("key_id") is not None and "error" in attempt.__dict__:
            open_attempt(attempt)
        return attempt


class TaskDependency(models.Model):
    """An edge: ``task`` waits for ``depends_on_id`` to finish."""

    UNRESOLVED, SATISFIED, FAILED = "", "satisfied", "failed"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="dependency_edges")
    depends_on_id = models.CharField(max_length=100)
    on_failure = models.CharField(max_length=16, choices=ON_FAILURE_CHOICES, default="block")
    resolution = models.CharField(max_length=10, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "depends_on_id"], name="dependency_edge_unique")]
        indexes = [models.Index(fields=["depends_on_id", "resolution"], name="dependency_upstream")]

    def __str__(self) -> str:
        return f"{self.task_id} -> {self.depends_on_id}"


class Queue(models.Model):
    """Per-queue settings; a row exists once any setting was made."""

    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False)
    policy = models.CharField(max_length=8, choices=POLICY_CHOICES, default="fifo")
    rate = models.FloatField(null=True, blank=True)  # tasks per second
    burst = models.PositiveIntegerField(null=True, blank=True)
    # Token bucket state, shared by all nodes through this row.
    tokens = models.FloatField(default=0.0)
    tokens_at = models.DateTimeField(null=True, blank=True)
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class GroupConfig(models.Model):
    """Firing thresholds per (queue, group); group "" is the queue default."""

    queue = models.CharField(max_length=100)
    group = models.CharField(max_length=200, blank=True, default="")
    max_size = models.PositiveIntegerField()
    max_delay = models.FloatField()
    grace = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "group"], name="group_config_unique")]
        ordering = ["queue", "group"]

    def __str__(self) -> str:
        return f"{self.queue}/{self.group or '*'}"


class CronEntry(models.Model):
    id = models.CharField(max_length=100, primary_key=True)
    spec = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    task_type = models.CharField(max_length=200)
    queue = models.CharField(max_length=100, default="default")
    payload = models.BinaryField(default=b"")
    content_type = models.CharField(max_length=100, default="application/json")
    options = models.JSONField(default=dict, blank=True)
    paused = models.BooleanField(default=False)
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The key the payload is sealed under; NULL: plaintext (as on Task).
    key_id = models.CharField(max_length=64, null=True, blank=True)

    seal_error = ""

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "cron entries"
        indexes = [models.Index(fields=["next_run_at"], condition=Q(paused=False), name="cron_due")]

    def __str__(self) -> str:
        return f"{self.id} ({self.spec})"

    @classmethod
    def from_db(cls, db, field_names, values, **kwargs):  # type: ignore[no-untyped-def]
        """An entry read through the ORM, its payload opened (conveyor/sealing.py)."""
        entry = super().from_db(db, field_names, values, **kwargs)
        if entry.__dict__.get("key_id") is not None and "payload" in entry.__dict__:
            from conveyor.exceptions import KeyUnavailable

            try:
                entry.payload = open_value(entry.key_id, entry.payload, CRON_PAYLOAD, entry.id)
            except KeyUnavailable as exc:
                entry.seal_error, entry.payload = exc.message, b""
        return entry


class WebhookRegistration(models.Model):
    name = models.CharField(max_length=100, primary_key=True)
    url = models.CharField(max_length=2000)
    queues = models.JSONField(default=dict)  # queue -> weight
    concurrency = models.PositiveIntegerField(default=10)
    secrets = models.JSONField(default=list, blank=True)  # newest first, at most two
    batch_types = models.JSONField(default=list, blank=True)
    request_timeout = models.FloatField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class WebhookStatus(models.Model):
    """What the node driving a registration last reported about it."""

    name = models.CharField(max_length=100, primary_key=True)
    node_id = models.CharField(max_length=64, blank=True, default="")
    breaker = models.CharField(max_length=12, default="closed")
    last_error = models.TextField(blank=True, default="")
    recent = models.JSONField(default=list, blank=True)  # latest delivery outcomes
    inflight = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField()


class Node(models.Model):
    """A running conveyord process, refreshed by its heartbeat."""

    id = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=200)
    port = models.PositiveIntegerField(default=0)
    pid = models.PositiveIntegerField(default=0)
    version = models.CharField(max_length=32, blank=True, default="")
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    leader_of = models.JSONField(default=list, blank=True)
    # Queues this node has dispatchers (and workers) for: other nodes wake
    # it through the channel layer only for these.
    queues = models.JSONField(default=list, blank=True)
    # The key of the session advisory lock the node holds while it runs
    # (PostgreSQL, conveyor/dispatch/liveness.py); null for a node that
    # holds none (an earlier version), which is never rescued early.
    liveness_key = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]


class WorkerSession(models.Model):
    """A connected worker (WebSocket session), owned by one node."""

    id = models.CharField(max_length=64, primary_key=True)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="sessions")
    queues = models.JSONField(default=dict)
    concurrency = models.PositiveIntegerField(default=1)
    inflight = models.PositiveIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    sdk_version = models.CharField(max_length=64, blank=True, default="")
    remote = models.CharField(max_length=200, blank=True, default="")
    connected_at = models.DateTimeField()

    class Meta:
        ordering = ["connected_at"]


class QueueMinute(models.Model):
    """Per-queue, per-minute counts for the dashboard's history charts.

    Nodes add their lifecycle-event counts every few seconds; the reaper's
    leader records the backlog (due waiting tasks). Kept for a day.
    """

    queue = models.CharField(max_length=100)
    minute = models.DateTimeField()
    enqueued = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    backlog = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "minute"], name="queue_minute_unique")]
        indexes = [models.Index(fields=["minute"], name="queue_minute_time")]

    def __str__(self) -> str:
        return f"{self.queue} {self.minute:%H:%M}"


class Offer(models.Model):
    """One unit of a node's idle capacity on a queue, lent to producers.

    A node whose queue is drained offers its free credit here; a producer's
    enqueue of one plain task may take an offer in its INSERT, which stores
    the task already leased (under the offer's lease id, to the offer's
    node) and notifies the node on the offer's channel. The node withdraws
    its offers before it leases; an offer it can no longer delete was taken,
    and its task is on the way (docs/architecture.md, "Offers").
    """

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=100)
    channel = models.CharField(max_length=63)  # the node's LISTEN channel
    lease_id = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=200)  # the node's id, the task's lease_holder
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["queue", "id"], name="offer_queue")]

    def __str__(self) -> str:
        return f"{self.queue} {self.lease_id}"


class BulkJob(models.Model):
    """An action on every task a filter matched when it was asked for, done in
    batches by the leader's bulk sweeper (conveyor/broker/bulk.py)."""

    RUNNING, DONE, FAILED = "running", "done", "failed"

    id = models.CharField(max_length=40, primary_key=True)
    action = models.CharField(max_length=12)  # cancel, run, archive, delete
    filter = models.JSONField(default=dict)  # the task list's query parameters
    state = models.CharField(max_length=10, default=RUNNING)
    total = models.PositiveIntegerField(default=0)  # matched when asked (the confirmed count)
    done = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)  # changed state (or no longer matched) in between
    failed = models.PositiveIntegerField(default=0)  # refused on their own (e.g. dependents waiting)
    cursor = models.CharField(max_length=100, blank=True, default="")  # last id looked at, in id order
    error = models.TextField(blank=True, default="")
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], condition=Q(state="running"), name="bulk_running")]

    def __str__(self) -> str:
        return f"{self.action} {self.id} ({self.state})"

    @property
    def processed(self) -> int:
        return self.done + self.skipped + self.failed

    @property
    def percent(self) -> int:
        return 100 if not self.total or self.state != self.RUNNING else min(100, 100 * self.processed // self.total)
