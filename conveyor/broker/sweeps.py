"""Maintenance sweeps: the backstops that keep state moving without a worker."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, F

from conveyor.broker.attempts import record_attempts
from conveyor.broker.base import Context
from conveyor.broker.outcomes import CANCELED_WHILE_RUNNING
from conveyor.broker.types import SweepReport
from conveyor.conf import conveyor_settings
from conveyor.models import Offer, TaskDependency
from conveyor.states import LEASABLE, TERMINAL, WAITING, State
from conveyor.store import NOBODY

PASS_LIMIT = 1000
LEASE_EXPIRED = "lease expired"
EXPIRED_BEFORE_DISPATCH = "task expired before dispatch"


class Sweeps:
    """The sweepers' passes: lease expiry, scheduled and expired tasks, purge."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reap_expired_leases(self) -> SweepReport:
        """Active tasks past their lease expiry go to retry (or archived when exhausted)."""
        now = self.ctx.now()
        report = SweepReport()
        with self.ctx.atomic():
            rows = list(
                self.ctx.tasks.select_for_update(skip_locked=True)
                .filter(state__is=State.ACTIVE, lease_expires_at__lte=now)
                .order_by("lease_expires_at")[:PASS_LIMIT]
            )
            record_attempts(self.ctx.store, rows, "lease-expired", now, NOBODY, LEASE_EXPIRED)
            retry = [r for r in rows if not r.cancel_requested and r.retried < r.max_retry]
            archive = [r for r in rows if r not in retry]
            if retry:
                self.ctx.tasks.filter(id__in=[r.id for r in retry]).update(
                    state=State.RETRY,
                    retried=F("retried") + 1,
                    due_at=now,
                    updated_at=now,
                    last_error=LEASE_EXPIRED,
                    lease_expires_at=None,
                )
                for r in retry:
                    r.state, r.retried, r.last_error = State.RETRY, r.retried + 1, LEASE_EXPIRED
                self.ctx.emit("retried", retry, now)
            for r in archive:
                reason = CANCELED_WHILE_RUNNING if r.cancel_requested else f"retries exhausted: {LEASE_EXPIRED}"
                self.ctx.tasks.filter(id=r.id).update(
                    state=State.ARCHIVED, finished_at=now, updated_at=now, last_error=reason, lease_expires_at=None
                )
                r.state, r.last_error = State.ARCHIVED, reason
            self.ctx.emit("archived", archive, now)
            self.ctx.resolve_after_commit([r.id for r in archive if r.has_dependents])
            report.count = len(rows)
            report.queues = {r.queue for r in rows}
            # Retries are due now; an archived keyed task frees a key's slot.
            self.ctx.wake_after_commit({r.queue for r in retry} | {r.queue for r in archive if r.concurrency_key})
        return report

    def promote_scheduled(self) -> SweepReport:
        """Scheduled tasks whose time has come become pending."""
        now = self.ctx.now()
        with self.ctx.atomic():
            rows = list(
                self.ctx.tasks.select_for_update(skip_locked=True)
                .filter(state__is=State.SCHEDULED, due_at__lte=now)
                .order_by("due_at")
                .only("id", "queue", "type", "state", "retried", "last_error", "key_id")[: PASS_LIMIT * 10]
            )
            if rows:
                self.ctx.tasks.filter(id__in=[r.id for r in rows], state=State.SCHEDULED).update(
                    state=State.PENDING, updated_at=now
                )
            for r in rows:
                r.state = State.PENDING
            queues = {r.queue for r in rows}
            self.ctx.wake_after_commit(queues)
            self.ctx.emit("promoted", rows, now)
        return SweepReport(len(rows), queues)

    def archive_expired(self) -> SweepReport:
        """Waiting tasks past their pre-dispatch expiry are archived."""
        now = self.ctx.now()
        with self.ctx.atomic():
            rows = list(
                self.ctx.tasks.select_for_update(skip_locked=True)
                .filter(state__among=WAITING, expires_at__lte=now)
                .only("id", "queue", "type", "state", "retried", "has_dependents")[:PASS_LIMIT]
            )
            if rows:
                self.ctx.tasks.filter(id__in=[r.id for r in rows]).update(
                    state=State.ARCHIVED, finished_at=now, updated_at=now, last_error=EXPIRED_BEFORE_DISPATCH
                )
            for r in rows:
                r.state, r.last_error = State.ARCHIVED, EXPIRED_BEFORE_DISPATCH
            self.ctx.emit("archived", rows, now)
            self.ctx.resolve_after_commit([r.id for r in rows if r.has_dependents])
        return SweepReport(len(rows), {r.queue for r in rows})

    def purge(self) -> SweepReport:
        """Delete finished rows past their retention; free lapsed unique claims;
        delete expired offers (a node's that died: conveyor.dispatch.offers).

        Completed rows go when their own retention (``purge_at``) passes;
        archived and canceled rows after the server-wide archive retention.
        A row an unresolved dependency edge still points at is kept.
        """
        now = self.ctx.now()
        cutoff = now - timedelta(seconds=conveyor_settings.ARCHIVE_RETENTION)
        with self.ctx.atomic():
            # Edges of dependents that finished without them are dead weight,
            # and would pin their upstream rows forever.
            self.ctx.edges.filter(resolution=TaskDependency.UNRESOLVED, task__state__in=TERMINAL).delete()
            purged = self.ctx.store.purge(now, cutoff, PASS_LIMIT * 10)
            self.ctx.tasks.filter(unique_key__isnull=False, unique_until__lte=now).update(unique_key=None)
        Offer.objects.using(self.ctx.db).filter(expires_at__lt=now).delete()
        return SweepReport(purged)

    def pending_counts(self) -> dict[str, int]:
        """Per queue, the number of due pending and retry tasks."""
        now = self.ctx.now()
        rows = (
            self.ctx.tasks.filter(state__among=LEASABLE, due_at__lte=now)
            .exclude(expires_at__lte=now)
            .values_list("queue")
            .annotate(n=Count("id"))
        )
        return dict(rows)
