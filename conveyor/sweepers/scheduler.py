"""Scheduler: promote due scheduled tasks and fire due cron entries."""

from __future__ import annotations

import logging

from conveyor.sweepers.base import Sweeper

logger = logging.getLogger("conveyor.sweepers")


class Scheduler(Sweeper):
    name = "scheduler"
    interval_setting = "SCHEDULER_INTERVAL"

    def run_once(self) -> dict[str, int]:
        promoted = self.broker.promote_scheduled()
        fired = 0
        for entry in self.broker.list_due_cron_entries():
            try:
                if self.broker.fire_cron_entry(entry) is not None:
                    fired += 1
            except Exception:
                # One broken entry must not stop the others (or the promotions).
                logger.exception("cron entry %s could not fire", entry.id)
        return {"promoted": promoted.count, "cron_fired": fired}
