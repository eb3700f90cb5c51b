"""Bulk sweeper: work through running bulk jobs, a few batches a pass (conveyor/broker/bulk.py)."""

from __future__ import annotations

from conveyor.conf import conveyor_settings
from conveyor.sweepers.base import Sweeper


class BulkSweeper(Sweeper):
    name = "bulk"
    interval_setting = "BULK_SWEEP_INTERVAL"

    def run_once(self) -> dict[str, int]:
        report = {"bulk_done": 0, "bulk_skipped": 0, "bulk_failed": 0, "bulk_jobs_finished": 0}
        budget = conveyor_settings.BULK_BATCHES_PER_PASS
        for job_id in self.broker.running_bulk_ids():
            while budget > 0:
                budget -= 1
                before = self.broker.bulk_job(job_id)
                job = self.broker.run_bulk_batch(job_id)
                report["bulk_done"] += job.done - before.done
                report["bulk_skipped"] += job.skipped - before.skipped
                report["bulk_failed"] += job.failed - before.failed
                if job.state != job.RUNNING:
                    report["bulk_jobs_finished"] += 1
                    break
        return report
