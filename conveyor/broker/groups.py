"""Aggregation groups: configs, stats, and which groups are due to fire."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Min

from conveyor.broker.base import Context
from conveyor.broker.types import GroupSettings, GroupStat
from conveyor.broker.validation import check_int, check_queue_name, check_seconds, check_text
from conveyor.conf import conveyor_settings
from conveyor.models import GroupConfig
from conveyor.states import State


class Groups:
    """Aggregation groups: their configs and stats, and which are due."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def group_configs_table(self) -> Any:
        return GroupConfig.objects.db_manager(self.ctx.db)

    def set_group_config(
        self,
        queue: str,
        group: str = "",
        *,
        max_size: int | None = None,
        max_delay: float | None = None,
        grace: float | None = None,
    ) -> GroupSettings:
        """Set thresholds for (queue, group); group "" sets the queue default."""
        check_queue_name(queue)
        group = check_text(group, "group", 200) or ""
        fields = {
            "max_size": check_int(max_size, "max_size", 1, 100_000)
            if max_size is not None
            else conveyor_settings.GROUP_MAX_SIZE,
            "max_delay": check_seconds(max_delay, "max_delay")
            if max_delay is not None
            else conveyor_settings.GROUP_MAX_DELAY,
            "grace": check_seconds(grace, "grace") if grace is not None else conveyor_settings.GROUP_GRACE,
        }
        self.group_configs_table.update_or_create(queue=queue, group=group, defaults=fields)
        return GroupSettings(queue, group, **fields)

    def delete_group_config(self, queue: str, group: str = "") -> None:
        self.group_configs_table.filter(queue=queue, group=group or "").delete()

    def group_configs(self) -> list[GroupSettings]:
        return [_settings(c) for c in self.group_configs_table.order_by("queue", "group")]

    def group_config(self, queue: str, group: str) -> GroupSettings:
        """The effective thresholds: the group's own, else the queue default, else the server's."""
        rows = {c.group: c for c in self.group_configs_table.filter(queue=queue, group__in=[group, ""])}
        row = rows.get(group) or rows.get("")
        if row is not None:
            return GroupSettings(queue, group, row.max_size, row.max_delay, row.grace)
        return GroupSettings(
            queue,
            group,
            conveyor_settings.GROUP_MAX_SIZE,
            conveyor_settings.GROUP_MAX_DELAY,
            conveyor_settings.GROUP_GRACE,
        )

    def group_stats(self, queue: str | None = None) -> list[GroupStat]:
        qs = self.ctx.tasks.filter(state__is=State.AGGREGATING)
        if queue:
            qs = qs.filter(queue=queue)
        rows = (
            qs.values_list("queue", "group")
            .annotate(n=Count("id"), oldest=Min("enqueued_at"), newest=Max("enqueued_at"))
            .order_by("queue", "group")
        )
        return [GroupStat(q, g, n, oldest, newest) for q, g, n, oldest, newest in rows]

    def due_groups(self) -> list[GroupStat]:
        """Groups past their size, max delay or grace period."""
        now = self.ctx.now()
        due = []
        configs: dict[tuple[str, str], GroupSettings] = {}
        for stat in self.group_stats():
            cfg = configs.setdefault((stat.queue, stat.group), self.group_config(stat.queue, stat.group))
            if (
                stat.count >= cfg.max_size
                or (now - stat.oldest).total_seconds() >= cfg.max_delay
                or (now - stat.newest).total_seconds() >= cfg.grace
            ):
                due.append(stat)
        return due


def _settings(row: GroupConfig) -> GroupSettings:
    return GroupSettings(row.queue, row.group, row.max_size, row.max_delay, row.grace)
