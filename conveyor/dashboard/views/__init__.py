"""The operator dashboard's views, one module per page."""

from conveyor.dashboard.views.cron import cron_action, cron_form, cron_list, cron_preview
from conveyor.dashboard.views.events import events
from conveyor.dashboard.views.limits import limits
from conveyor.dashboard.views.overview import overview
from conveyor.dashboard.views.queues import (
    queue_concurrency_limit,
    queue_detail,
    queue_group_config,
    queue_pause,
    queue_policy,
    queue_rate_limit,
    queues,
)
from conveyor.dashboard.views.tasks import task_action, task_detail, tasks, tasks_action, tasks_bulk
from conveyor.dashboard.views.webhooks import webhook_action, webhook_form, webhooks
from conveyor.dashboard.views.workers import workers

__all__ = [
    "cron_action",
    "cron_form",
    "cron_list",
    "cron_preview",
    "events",
    "limits",
    "overview",
    "queue_concurrency_limit",
    "queue_detail",
    "queue_group_config",
    "queue_pause",
    "queue_policy",
    "queue_rate_limit",
    "queues",
    "task_action",
    "task_detail",
    "tasks",
    "tasks_action",
    "tasks_bulk",
    "webhook_action",
    "webhook_form",
    "webhooks",
    "workers",
]
