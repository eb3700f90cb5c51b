"""Sweepers: the scheduler, the reaper, the group sweeper and the bulk sweeper."""

from __future__ import annotations

from conveyor.sweepers.bulk import BulkSweeper
from conveyor.sweepers.groups import GroupSweeper
from conveyor.sweepers.reaper import Reaper
from conveyor.sweepers.scheduler import Scheduler

SWEEPERS = {cls.name: cls for cls in (Scheduler, Reaper, GroupSweeper, BulkSweeper)}

__all__ = ["SWEEPERS", "BulkSweeper", "GroupSweeper", "Reaper", "Scheduler"]
