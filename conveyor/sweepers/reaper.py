"""Reaper: recover what no worker will: expired leases, expiries, retention, lost wakes."""

from __future__ import annotations

from conveyor import stats
from conveyor.sweepers.base import Sweeper


class Reaper(Sweeper):
    name = "reaper"
    interval_setting = "REAPER_INTERVAL"

    def run_once(self) -> dict[str, int]:
        reaped = self.broker.reap_expired_leases()
        expired = self.broker.archive_expired()
        purged = self.broker.purge()
        promoted = self.broker.promote_ready_dependents()
        # Lost-wake backstop: every queue with due work hears about it again
        # (one coalesced message per queue; a busy dispatcher ignores it).
        due = self.broker.pending_counts()
        if due:
            self.broker.hooks.wake(sorted(due))
        # The backlog of the history charts (not task state).
        stats.record_backlog(due, self.broker.now(), using=self.broker.db)
        return {
            "reaped": reaped.count,
            "expired": expired.count,
            "purged": purged.count,
            "dependents_promoted": promoted.count,
            "queues_woken": len(due),
        }
