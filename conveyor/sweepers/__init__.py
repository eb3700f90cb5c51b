"""Sweepers: the scheduler, the reaper, the group sweeper, the bulk sweeper and the rescuer."""

from __future__ import annotations

from conveyor.sweepers.bulk import BulkSweeper
from conveyor.sweepers.groups import GroupSweeper
from conveyor.sweepers.reaper import Reaper
from conveyor.sweepers.rescuer import Rescuer
from conveyor.sweepers.scheduler import Scheduler

SWEEPERS = {cls.name: cls for cls in (Scheduler, Reaper, GroupSweeper, BulkSweeper, Rescuer)}

__all__ = ["SWEEPERS", "BulkSweeper", "GroupSweeper", "Reaper", "Rescuer", "Scheduler"]
