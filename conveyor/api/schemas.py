"""Serializers that describe request and response bodies for the OpenAPI schema.

Requests are parsed by ``conveyor.api.parse`` and validated by the broker;
these classes document the shapes (drf-spectacular reads them).
"""

from __future__ import annotations

from rest_framework import serializers as s

STATES = ["scheduled", "pending", "active", "retry", "completed", "archived", "canceled", "aggregating", "blocked"]


class DependencyItem(s.Serializer):
    task_id = s.CharField()
    on_failure = s.ChoiceField(["block", "continue", "cascade_cancel"], default="block")


class RetryPolicy(s.Serializer):
    kind = s.ChoiceField(["exponential", "linear", "fixed"], required=False)
    base = s.CharField(required=False, help_text='seconds or a duration like "2s"')
    cap = s.CharField(required=False, help_text='seconds or a duration like "15m"')


class EnqueueRequest(s.Serializer):
    type = s.CharField(help_text="task type, the handler's routing key")
    queue = s.CharField(required=False, default="default")
    id = s.CharField(required=False, help_text="your id; re-sending it is idempotent")
    json = s.JSONField(required=False, help_text="a JSON payload (any JSON value)")
    payload = s.CharField(required=False, help_text="base64 bytes (instead of json)")
    content_type = s.CharField(required=False)
    priority = s.IntegerField(required=False, min_value=0, max_value=9)
    max_retry = s.IntegerField(required=False, min_value=0)
    process_at = s.DateTimeField(required=False)
    process_in = s.CharField(required=False, help_text='delay: seconds or "30s", "5m"')
    expires_at = s.DateTimeField(required=False)
    expires_in = s.CharField(required=False)
    unique_key = s.CharField(required=False)
    unique_ttl = s.CharField(required=False)
    unique = s.BooleanField(required=False)
    group = s.CharField(required=False)
    concurrency_key = s.CharField(required=False)
    depends_on = DependencyItem(many=True, required=False)
    timeout = s.CharField(required=False)
    deadline = s.DateTimeField(required=False)
    retention = s.CharField(required=False)
    retry_policy = RetryPolicy(required=False)
    metadata = s.DictField(child=s.CharField(), required=False)


class Task(s.Serializer):
    id = s.CharField()
    queue = s.CharField()
    type = s.CharField()
    state = s.ChoiceField(STATES)
    priority = s.IntegerField()
    content_type = s.CharField()
    payload = s.CharField(help_text="base64")
    json = s.JSONField(allow_null=True, help_text="the payload decoded, when it is JSON")
    payload_size = s.IntegerField()
    metadata = s.DictField(child=s.CharField())
    result = s.JSONField(allow_null=True)
    max_retry = s.IntegerField()
    retried = s.IntegerField()
    attempt = s.IntegerField()
    last_error = s.CharField(allow_blank=True)
    enqueued_at = s.DateTimeField()
    due_at = s.DateTimeField()
    started_at = s.DateTimeField(allow_null=True)
    finished_at = s.DateTimeField(allow_null=True)
    updated_at = s.DateTimeField()
    expires_at = s.DateTimeField(allow_null=True)
    deadline = s.DateTimeField(allow_null=True)
    timeout = s.FloatField(allow_null=True)
    retention = s.FloatField(allow_null=True)
    unique_key = s.CharField(allow_null=True)
    group = s.CharField(allow_null=True)
    concurrency_key = s.CharField(allow_null=True)
    lease_holder = s.CharField(allow_null=True)
    lease_expires_at = s.DateTimeField(allow_null=True)
    progress = s.IntegerField()
    progress_message = s.CharField(allow_blank=True)
    cancel_requested = s.BooleanField()


class Error(s.Serializer):
    error = s.CharField(help_text="invalid_argument, not_found, already_exists, failed_precondition, ...")
    message = s.CharField()
    field = s.CharField(required=False)
    index = s.IntegerField(required=False)


class TaskList(s.Serializer):
    tasks = EnqueueRequest(many=True)


class TaskListResponse(s.Serializer):
    tasks = Task(many=True)


class BatchItem(s.Serializer):
    index = s.IntegerField()
    created = s.BooleanField(required=False)
    task = Task(required=False)
    error = Error(required=False)


class BatchResults(s.Serializer):
    results = BatchItem(many=True)


class TaskPage(s.Serializer):
    tasks = Task(many=True)
    next_page_token = s.CharField(allow_null=True)


class RescheduleRequest(s.Serializer):
    process_at = s.DateTimeField(required=False)
    process_in = s.CharField(required=False)


class IdsRequest(s.Serializer):
    ids = s.ListField(child=s.CharField(), min_length=1, max_length=1000)
    process_at = s.DateTimeField(required=False, help_text="reschedule only")
    process_in = s.CharField(required=False, help_text="reschedule only")


class IdResult(s.Serializer):
    id = s.CharField()
    ok = s.BooleanField()
    task = Task(required=False)
    error = Error(required=False)


class IdResults(s.Serializer):
    results = IdResult(many=True)


class RateLimit(s.Serializer):
    queue = s.CharField(read_only=True)
    rate = s.FloatField(help_text="tasks per second")
    burst = s.IntegerField(default=1, min_value=1)


class ConcurrencyLimit(s.Serializer):
    queue = s.CharField(read_only=True)
    limit = s.IntegerField(min_value=1)


class Queue(s.Serializer):
    name = s.CharField()
    paused = s.BooleanField()
    policy = s.ChoiceField(["fifo", "lifo", "random"])
    counts = s.DictField(child=s.IntegerField())
    total = s.IntegerField()
    oldest_due_at = s.DateTimeField(allow_null=True)
    rate_limit = RateLimit(allow_null=True)
    concurrency_limit = s.IntegerField(allow_null=True)


class QueueList(s.Serializer):
    queues = Queue(many=True)


class PolicyRequest(s.Serializer):
    policy = s.ChoiceField(["fifo", "lifo", "random"])


class Ok(s.Serializer):
    queue = s.CharField()


class Limits(s.Serializer):
    rate_limits = RateLimit(many=True)
    concurrency_limits = ConcurrencyLimit(many=True)


class GroupConfig(s.Serializer):
    queue = s.CharField()
    group = s.CharField(allow_blank=True, default="")
    max_size = s.IntegerField(required=False)
    max_delay = s.FloatField(required=False)
    grace = s.FloatField(required=False)


class GroupStat(s.Serializer):
    queue = s.CharField()
    group = s.CharField()
    count = s.IntegerField()
    oldest = s.DateTimeField()
    newest = s.DateTimeField()


class Groups(s.Serializer):
    configs = GroupConfig(many=True)
    groups = GroupStat(many=True)


class CronRequest(s.Serializer):
    id = s.CharField()
    spec = s.CharField(help_text="5 fields (minute first) or 6 (seconds first), or @hourly etc.")
    task_type = s.CharField()
    queue = s.CharField(default="default")
    json = s.JSONField(required=False)
    payload = s.CharField(required=False)
    content_type = s.CharField(required=False)
    timezone = s.CharField(default="UTC")
    options = s.DictField(required=False)
    paused = s.BooleanField(default=False)


class CronEntry(s.Serializer):
    id = s.CharField()
    spec = s.CharField()
    timezone = s.CharField()
    task_type = s.CharField()
    queue = s.CharField()
    content_type = s.CharField()
    payload = s.CharField()
    json = s.JSONField(allow_null=True)
    options = s.DictField()
    paused = s.BooleanField()
    next_run_at = s.DateTimeField()
    last_run_at = s.DateTimeField(allow_null=True)


class CronList(s.Serializer):
    entries = CronEntry(many=True)


class WebhookRequest(s.Serializer):
    name = s.CharField()
    url = s.URLField()
    queues = s.DictField(child=s.IntegerField(min_value=1))
    concurrency = s.IntegerField(default=10, min_value=1)
    secrets = s.ListField(child=s.CharField(), required=False, max_length=2, help_text="newest first; write-only")
    batch_types = s.ListField(child=s.CharField(), required=False)
    request_timeout = s.CharField(required=False)
    paused = s.BooleanField(default=False)


class WebhookStatus(s.Serializer):
    node = s.CharField()
    breaker = s.CharField()
    last_error = s.CharField(allow_blank=True)
    inflight = s.IntegerField()
    recent = s.ListField(child=s.DictField())
    updated_at = s.DateTimeField()


class Webhook(s.Serializer):
    name = s.CharField()
    url = s.CharField()
    queues = s.DictField(child=s.IntegerField())
    concurrency = s.IntegerField()
    secret_count = s.IntegerField()
    batch_types = s.ListField(child=s.CharField())
    request_timeout = s.FloatField(allow_null=True)
    paused = s.BooleanField()
    created_at = s.DateTimeField()
    updated_at = s.DateTimeField()
    status = WebhookStatus(required=False)


class WebhookList(s.Serializer):
    webhooks = Webhook(many=True)


class WorkerSession(s.Serializer):
    id = s.CharField()
    node = s.CharField()
    queues = s.DictField(child=s.IntegerField())
    concurrency = s.IntegerField()
    inflight = s.IntegerField()
    labels = s.DictField(child=s.CharField())
    sdk_version = s.CharField()
    remote = s.CharField()
    connected_at = s.DateTimeField()


class WorkerList(s.Serializer):
    workers = WorkerSession(many=True)


class ClusterNode(s.Serializer):
    id = s.CharField()
    host = s.CharField()
    port = s.IntegerField()
    pid = s.IntegerField()
    version = s.CharField()
    started_at = s.DateTimeField()
    seen_at = s.DateTimeField()
    leader_of = s.ListField(child=s.CharField())
    sessions = WorkerSession(many=True)


class Cluster(s.Serializer):
    nodes = ClusterNode(many=True)


class Info(s.Serializer):
    version = s.CharField()
    driver = s.CharField()
    time = s.DateTimeField()
