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
