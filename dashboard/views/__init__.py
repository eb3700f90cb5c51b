"""The operator dashboard's views, one module per page."""

from dashboard.views.cron import cron_action, cron_form, cron_list, cron_preview
from dashboard.views.events import events
from dashboard.views.overview import overview
from dashboard.views.queues import (
    queue_concurrency_limit,
    queue_detail,
    queue_group_config,
    queue_pause,
    queue_policy,
    queue_rate_limit,
    queues,
)
from dashboard.views.tasks import task_action, task_detail, tasks, tasks_action
from dashboard.views.webhooks import webhook_action, webhook_form, webhooks
from dashboard.views.workers import workers

__all__ = [
    "cron_action",
    "cron_form",
    "cron_list",
    "cron_preview",
    "events",
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
    "webhook_action",
    "webhook_form",
    "webhooks",
    "workers",
]
