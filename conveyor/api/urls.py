from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from conveyor.api import admin, bulk, tasks


@csrf_exempt  # it changes nothing; a POST without a CSRF token would get Django's HTML 403 instead
def no_endpoint(request: HttpRequest) -> JsonResponse:
    """Anything else under /api/v1/: a JSON 404, like every other API error."""
    return JsonResponse({"error": "not_found", "message": f"no API endpoint at {request.path}"}, status=404)


urlpatterns = [
    path("tasks", tasks.EnqueueView.as_view(), name="tasks"),
    path("tasks/batch", tasks.EnqueueBatchView.as_view(), name="tasks-batch"),
    path("tasks/tx", tasks.EnqueueTxView.as_view(), name="tasks-tx"),
    path("tasks/bulk", bulk.BulkJobsView.as_view(), name="tasks-bulk"),
    path("tasks/bulk/<str:job_id>", bulk.BulkJobView.as_view(), name="tasks-bulk-job"),
    path("tasks/count", bulk.TaskCountView.as_view(), name="tasks-count"),
    path("tasks/actions/<str:action>", admin.TaskBatchActionView.as_view(), name="tasks-action"),
    path("tasks/<str:task_id>", tasks.TaskDetailView.as_view(), name="task"),
    path("tasks/<str:task_id>/<str:action>", admin.TaskActionView.as_view(), name="task-action"),
    path("queues", admin.QueueListView.as_view(), name="queues"),
    path("queues/<str:name>/policy", admin.QueuePolicyView.as_view(), name="queue-policy"),
    path("queues/<str:name>/rate-limit", admin.RateLimitView.as_view(), name="queue-rate-limit"),
    path("queues/<str:name>/concurrency-limit", admin.ConcurrencyLimitView.as_view(), name="queue-concurrency-limit"),
    path("queues/<str:name>/<str:action>", admin.QueueActionView.as_view(), name="queue-action"),
    path("limits", admin.LimitListView.as_view(), name="limits"),
    path("groups", admin.GroupConfigView.as_view(), name="groups"),
    path("cron", admin.CronListView.as_view(), name="cron"),
    path("cron/<str:entry_id>", admin.CronDetailView.as_view(), name="cron-entry"),
    path("cron/<str:entry_id>/<str:action>", admin.CronActionView.as_view(), name="cron-action"),
    path("webhooks", admin.WebhookListView.as_view(), name="webhooks"),
    path("webhooks/<str:name>", admin.WebhookDetailView.as_view(), name="webhook"),
    path("webhooks/<str:name>/<str:action>", admin.WebhookActionView.as_view(), name="webhook-action"),
    path("workers", admin.WorkerListView.as_view(), name="workers"),
    path("cluster", admin.ClusterView.as_view(), name="cluster"),
    path("info", admin.InfoView.as_view(), name="info"),
    path("stats/history", admin.HistoryView.as_view(), name="stats-history"),
    re_path(r"^[\s\S]*$", no_endpoint),  # [\s\S], not (?s): reverse() cannot read inline flags
]
