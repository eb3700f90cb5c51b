from __future__ import annotations

from django.templatetags.static import static
from django.urls import path
from django.views.generic.base import RedirectView

from conveyor.dashboard import views

app_name = "dashboard"  # under conveyor.urls: "conveyor:dashboard:<name>"

# Task and cron ids may contain "/" (see check_task_id), hence <path:>; a detail
# URL ends in "/", an action URL in the action name, so the two never collide.
urlpatterns = [
    path("", views.overview, name="overview"),
    path("queues/", views.queues, name="queues"),
    path("queues/<str:name>/", views.queue_detail, name="queue"),
    path("queues/<str:name>/policy", views.queue_policy, name="queue-policy"),
    path("queues/<str:name>/rate-limit", views.queue_rate_limit, name="queue-rate-limit"),
    path("queues/<str:name>/concurrency-limit", views.queue_concurrency_limit, name="queue-concurrency-limit"),
    path("queues/<str:name>/group-config", views.queue_group_config, name="queue-group-config"),
    path("queues/<str:name>/<str:action>", views.queue_pause, name="queue-action"),
    path("tasks/", views.tasks, name="tasks"),
    path("tasks/actions", views.tasks_action, name="tasks-action"),
    path("tasks/bulk", views.tasks_bulk, name="tasks-bulk"),
    path("tasks/<path:task_id>/", views.task_detail, name="task"),
    path("tasks/<path:task_id>/<str:action>", views.task_action, name="task-action"),
    path("limits/", views.limits, name="limits"),
    path("workers/", views.workers, name="workers"),
    path("cron/", views.cron_list, name="cron"),
    path("cron/new", views.cron_form, name="cron-new"),
    path("cron/preview", views.cron_preview, name="cron-preview"),
    path("cron/<path:entry_id>/edit", views.cron_form, name="cron-edit"),
    path("cron/<path:entry_id>/<str:action>", views.cron_action, name="cron-action"),
    path("webhooks/", views.webhooks, name="webhooks"),
    path("webhooks/new", views.webhook_form, name="webhook-new"),
    path("webhooks/<str:name>/edit", views.webhook_form, name="webhook-edit"),
    path("webhooks/<str:name>/<str:action>", views.webhook_action, name="webhook-action"),
    path("events/", views.events, name="events"),
    # Browsers ask for /favicon.ico on pages that name none (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("conveyor/dashboard/favicon.svg"), permanent=True)),
]
