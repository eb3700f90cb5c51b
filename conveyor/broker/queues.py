"""Per-queue settings (pause, policy, rate and concurrency limits) and stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Min

from conveyor.broker.base import Context
from conveyor.broker.types import ConcurrencyLimit, QueueStats, RateLimit
from conveyor.broker.validation import check_int, check_queue_name
from conveyor.exceptions import InvalidArgument
from conveyor.models import Queue
from conveyor.states import ALL_STATES, LEASABLE, State

STATE_NAMES = [s.value for s in ALL_STATES]

POLICIES = ("fifo", "lifo", "random")
MAX_RATE = 1_000_000.0
MAX_BURST = 1_000_000


class Queues:
    """Per-queue settings (pause, policy, rate and concurrency limits) and stats."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def queues(self) -> Any:
        return Queue.objects.db_manager(self.ctx.db)

    def _queue_row(self, name: str) -> Queue:
        check_queue_name(name)
        row, _ = self.queues.get_or_create(name=name)
        return row

    def _save(self, name: str, now: datetime | None = None, **fields: Any) -> Queue:
        with self.ctx.atomic():
            row = self._queue_row(name)
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = now or self.ctx.now()
            row.save()
        return row

    # -- pause -------------------------------------------------------------------

    def set_queue_paused(self, name: str, paused: bool) -> None:
        self._save(name, paused=bool(paused))
        if not paused:
            self.ctx.wake_after_commit([name])

    def queue_paused(self, name: str) -> bool:
        return bool(self.queues.filter(name=name, paused=True).exists())

    # -- ordering policy -----------------------------------------------------------

    def set_queue_policy(self, name: str, policy: str) -> None:
        if policy not in POLICIES:
            raise InvalidArgument("policy", f"must be one of {', '.join(POLICIES)}")
        self._save(name, policy=policy)

    def queue_policy(self, name: str) -> str:
        return self.queues.filter(name=name).values_list("policy", flat=True).first() or "fifo"

    # -- rate limits ---------------------------------------------------------------

    def set_rate_limit(self, name: str, rate: float, burst: int = 1) -> RateLimit:
        """Limit *name* to *rate* tasks/s with a bucket of *burst* tokens."""
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= MAX_RATE:
            raise InvalidArgument("rate", f"must be a number of tasks per second in (0, {MAX_RATE:g}]")
        check_int(burst, "burst", 1, MAX_BURST)
        now = self.ctx.now()
        # A fresh limit starts with a full bucket.
        self._save(name, now, rate=float(rate), burst=burst, tokens=float(burst), tokens_at=now)
        self.ctx.wake_after_commit([name])
        return RateLimit(name, float(rate), burst)

    def delete_rate_limit(self, name: str) -> None:
        if self.queues.filter(name=name).update(rate=None, burst=None, tokens=0.0, tokens_at=None):
            self.ctx.wake_after_commit([name])

    def rate_limit(self, name: str) -> RateLimit | None:
        row = self.queues.filter(name=name, rate__isnull=False).first()
        return RateLimit(row.name, row.rate, row.burst or 1) if row else None

    def rate_limits(self) -> list[RateLimit]:
        rows = self.queues.filter(rate__isnull=False).order_by("name")
        return [RateLimit(r.name, r.rate, r.burst or 1) for r in rows]

    # -- concurrency limits ----------------------------------------------------------

    def set_concurrency_limit(self, name: str, limit: int) -> ConcurrencyLimit:
        """At most *limit* active tasks per concurrency key in queue *name*."""
        check_int(limit, "limit", 1, 1_000_000)
        self._save(name, concurrency_limit=limit)
        self.ctx.wake_after_commit([name])
        return ConcurrencyLimit(name, limit)

    def delete_concurrency_limit(self, name: str) -> None:
        if self.queues.filter(name=name).update(concurrency_limit=None):
            self.ctx.wake_after_commit([name])

    def concurrency_limit(self, name: str) -> ConcurrencyLimit | None:
        row = self.queues.filter(name=name, concurrency_limit__isnull=False).first()
        return ConcurrencyLimit(row.name, row.concurrency_limit) if row else None

    def concurrency_limits(self) -> list[ConcurrencyLimit]:
        rows = self.queues.filter(concurrency_limit__isnull=False).order_by("name")
        return [ConcurrencyLimit(r.name, r.concurrency_limit) for r in rows]

    def key_usage(self, per_queue: int = 20) -> dict[str, list[tuple[str, int]]]:
        """Active tasks per concurrency key, busiest first, at most *per_queue* keys a queue
        (the partial index ``task_active_key`` holds exactly these rows)."""
        rows = (
            self.ctx.tasks.filter(state=State.ACTIVE, concurrency_key__isnull=False)
            .values_list("queue", "concurrency_key")
            .annotate(n=Count("id"))
            .order_by("queue", "-n", "concurrency_key")
        )
        usage: dict[str, list[tuple[str, int]]] = {}
        for queue, key, n in rows:
            keys = usage.setdefault(queue, [])
            if len(keys) < per_queue:
                keys.append((key, n))
        return usage

    # -- stats -------------------------------------------------------------------

    def queue_stats(self) -> list[QueueStats]:
        """Every known queue with counts per state, sorted by name."""
        now = self.ctx.now()
        counts: dict[str, dict[str, int]] = {}
        for queue, state, n in self.ctx.tasks.values_list("queue", "state").annotate(n=Count("id")).order_by():
            counts.setdefault(queue, dict.fromkeys(STATE_NAMES, 0))[state] = n
        oldest = dict(
            self.ctx.tasks.filter(state__among=LEASABLE, due_at__lte=now)
            .values_list("queue")
            .annotate(m=Min("due_at"))
            .order_by()
        )
        settings = {q.name: q for q in self.queues.all()}
        names = sorted(set(counts) | set(settings))
        return [
            QueueStats(
                name=name,
                paused=bool(settings.get(name) and settings[name].paused),
                counts=counts.get(name, dict.fromkeys(STATE_NAMES, 0)),
                policy=settings[name].policy if name in settings else "fifo",
                oldest_due_at=oldest.get(name),
            )
            for name in names
        ]
