"""Sweepers: the scheduler, the reaper and the group sweeper."""

from __future__ import annotations

from conveyor.sweepers.groups import GroupSweeper
from conveyor.sweepers.reaper import Reaper
from conveyor.sweepers.scheduler import Scheduler

SWEEPERS = {cls.name: cls for cls in (Scheduler, Reaper, GroupSweeper)}

__all__ = ["SWEEPERS", "GroupSweeper", "Reaper", "Scheduler"]
