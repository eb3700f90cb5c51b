"""Group sweeper: fire aggregation groups past their size, max delay or grace."""

from __future__ import annotations

from conveyor.states import State
from conveyor.sweepers.base import Sweeper


class GroupSweeper(Sweeper):
    name = "groups"
    interval_setting = "GROUP_SWEEP_INTERVAL"

    def run_once(self) -> dict[str, int]:
        fired = 0
        for stat in self.broker.due_groups():
            task_type = (
                self.broker.tasks.filter(queue=stat.queue, group=stat.group, state=State.AGGREGATING)
                .values_list("type", flat=True)
                .first()
            )
            if task_type is None:
                continue
            self.fire(stat.queue, stat.group, task_type)
            fired += 1
        return {"groups_fired": fired}

    def fire(self, queue: str, group: str, task_type: str) -> None:
        """Ask the queue's dispatchers to lease and deliver the group."""
        if self.node is not None:
            self.node.call_soon(self.node.fire_group, queue, group, task_type)
        else:
            from conveyor.notify.layer import fire_group_message, send_to_queue

            send_to_queue(queue, fire_group_message(queue, group, task_type))
