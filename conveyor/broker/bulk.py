"""Bulk actions on a filter: cancel, run, archive or delete every task it matches.

``start_bulk`` counts what the filter matches now (the count the operator
confirmed) and records a ``BulkJob``; the leader's bulk sweeper
(conveyor/sweepers/bulk.py) then works through it in batches, in id order
from the job's cursor, so a job survives its node: whichever node leads
next goes on where the cursor stands. Each batch is one transaction: its
rows are locked and checked again (still matching, still in a state the
action applies to); a row that changed in between is skipped and counted.
Tasks enqueued after the job started are never part of it.
"""

from __future__ import annotations

from typing import Any

from conveyor.broker.admin import Admin
from conveyor.broker.base import Context
from conveyor.broker.filters import TaskFilter, parse_filter
from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError, InvalidArgument, NotFound
from conveyor.ids import new_ulid
from conveyor.models import BulkJob, Task
from conveyor.states import ADMIN_FROM

BULK_ACTIONS = ("cancel", "run", "archive", "delete")


class Bulk:
    """Bulk jobs: an operator action on every task a filter matches, in batches."""

    def __init__(self, ctx: Context, admin: Admin) -> None:
        self.ctx = ctx
        self.admin = admin  # what matches a filter; the action on one row
        self.row_actions = {
            "cancel": admin.cancel_row,
            "run": admin.run_row,
            "archive": admin.archive_row,
            "delete": admin.delete_row,
        }

    @property
    def bulk(self) -> Any:
        return BulkJob.objects.db_manager(self.ctx.db)

    def count_matching(self, action: str, selected: TaskFilter) -> int:
        """How many tasks *selected* matches that *action* applies to now."""
        return int(self.admin.filtered(selected).filter(state__in=ADMIN_FROM[_action(action)]).count())

    def start_bulk(self, action: str, params: dict[str, Any], *, by: str = "") -> BulkJob:
        """Record a job doing *action* on every task the filter *params* matches now."""
        action = _action(action)
        selected = parse_filter(params)
        if not selected.as_params():
            raise InvalidArgument("filter", "must filter by something: an action on every task is not offered")
        now = self.ctx.now()
        job = BulkJob(id="bulk-" + new_ulid(now), action=action, filter=selected.as_params(), created_by=by[:150],
                      created_at=now, updated_at=now)  # fmt: skip
        job.total = self.count_matching(action, selected)
        if not job.total:
            job.state, job.finished_at = BulkJob.DONE, now
        job.save(using=self.ctx.db)
        return job

    def bulk_job(self, job_id: str) -> BulkJob:
        job = self.bulk.filter(id=job_id).first()
        if job is None:
            raise NotFound(f"bulk job {job_id} not found", job_id=job_id)
        return job  # type: ignore[no-any-return]

    def bulk_jobs(self, limit: int = 20) -> list[BulkJob]:
        """The newest jobs first."""
        return list(self.bulk.order_by("-created_at", "-id")[:limit])

    def running_bulk_ids(self) -> list[str]:
        return list(self.bulk.filter(state=BulkJob.RUNNING).order_by("created_at").values_list("id", flat=True))

    def run_bulk_batch(self, job_id: str, size: int | None = None) -> BulkJob:
        """Do the next batch of job *job_id* in one transaction; the job as it stands after."""
        size = size or conveyor_settings.BULK_BATCH_SIZE
        now = self.ctx.now()
        with self.ctx.atomic():
            job = self.bulk.select_for_update().filter(id=job_id).first()
            if job is None or job.state != BulkJob.RUNNING:
                return job or self.bulk_job(job_id)
            scope = self.admin.filtered(parse_filter(job.filter)).filter(
                state__in=ADMIN_FROM[job.action], enqueued_at__lte=job.created_at
            )
            ids = list(scope.filter(id__gt=job.cursor).order_by("id").values_list("id", flat=True)[:size])
            # Locked and checked again: a row that changed since it was read
            # (by a worker, an operator, a sweeper) is not touched.
            rows: list[Task] = list(scope.select_for_update().filter(id__in=ids).order_by("id"))
            job.skipped += len(ids) - len(rows)
            for row in rows:
                try:
                    with self.ctx.atomic():  # a savepoint: one refusal undoes only its own row
                        self.row_actions[job.action](row, now)
                    job.done += 1
                except ConveyorError:
                    job.failed += 1
            if ids:
                job.cursor = ids[-1]
            if len(ids) < size:
                # Done. What matched when asked but was never reached (it
                # changed state before its batch) counts as skipped too.
                job.skipped += max(0, job.total - job.processed)
                job.state, job.finished_at = BulkJob.DONE, now
            job.updated_at = now
            job.save(using=self.ctx.db)
        return job  # type: ignore[no-any-return]


def _action(action: str) -> str:
    if action not in BULK_ACTIONS:
        raise InvalidArgument("action", f"must be one of {', '.join(BULK_ACTIONS)}")
    return action
