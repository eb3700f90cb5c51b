"""Serializers that describe request and response bodies for the OpenAPI schema.

Requests are parsed by ``conveyor.broker.parse`` and validated by the broker;
these classes document the shapes (drf-spectacular reads them). Optional
request fields accept ``null`` (and strings accept ``""``) meaning "absent",
as protobuf JSON does; the schema says so, so a client generated from it
may send them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field
from rest_framework import serializers as s

from conveyor.broker import request

STATES = ["scheduled", "pending", "active", "retry", "completed", "archived", "canceled", "aggregating", "blocked"]


def _pattern(regex: str) -> str:
    return regex.replace("\\Z", "$")  # OpenAPI's patterns are ECMA regexes: no \Z


QUEUE_PATTERN = _pattern(request.TASK_FIELDS["queue"].pattern or "")
TASK_ID_PATTERN = _pattern(request.TASK_FIELDS["id"].pattern or "")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# A query filter: empty means "any".
OPTIONAL_QUEUE = {"type": "string", "pattern": r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$", "maxLength": 100}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Bearer <token>`` with a token from ``CONVEYOR_API_TOKENS``."""

    target_class = "conveyor.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "an API token (CONVEYOR_API_TOKENS)"}


@extend_schema_field(
    {
        "oneOf": [{"type": "string", "example": "30s"}, {"type": "number", "minimum": 0}],
        "nullable": True,
        "description": 'seconds, or a duration like "30s", "5m", "1h30m", "7d"',
    }
)
class Duration(s.Field):
    """A duration in a request that may be zero: seconds or a duration string."""


@extend_schema_field(
    {
        "oneOf": [{"type": "string", "example": "30s"}, {"type": "number", "minimum": 0, "exclusiveMinimum": True}],
        "nullable": True,
        "description": 'seconds (> 0), or a duration like "30s", "5m", "1h30m", "7d"',
    }
)
class PositiveDuration(s.Field):
    """A duration in a request that must be longer than zero."""


def opt(field: type[s.Field], **kwargs: Any) -> s.Field:
    """An optional request field; null means absent (and "" too, for strings)."""
    if issubclass(field, s.CharField) or field is s.ChoiceField:
        kwargs.setdefault("allow_blank", True)
    return field(required=False, allow_null=True, **kwargs)


def queue_field(**kwargs: Any) -> s.Field:
    return s.RegexField(QUEUE_PATTERN, max_length=100, **kwargs)


def _text(field: request.Field, **kwargs: Any) -> s.Field:
    if field.required:
        return s.CharField(max_length=field.max_length, help_text=field.help, **kwargs)
    return opt(s.CharField, max_length=field.max_length, help_text=field.help, **kwargs)


def _name(field: request.Field) -> s.Field:
    regex, length, text = _pattern(field.pattern or ""), field.max_length, field.help
    if field.required:
        return s.RegexField(regex, max_length=length, help_text=text)
    return opt(s.RegexField, regex=regex, max_length=length, help_text=text)


DURATION = 'seconds, or a duration like "30s", "5m", "1h30m", "7d"'
# The schema of each kind of request field (conveyor/broker/request.py).
KIND_SCHEMAS: dict[str, Callable[[request.Field], s.Field]] = {
    "text": _text,
    "name": _name,
    "json": lambda f: s.JSONField(required=False, allow_null=True, help_text=f.help),
    "base64": lambda f: opt(s.CharField, help_text=f.help),
    "integer": lambda f: opt(s.IntegerField, min_value=f.minimum, max_value=f.maximum, help_text=f.help),
    "choice": lambda f: opt(s.ChoiceField, choices=list(f.choices), help_text=f.help),
    "time": lambda f: opt(s.DateTimeField, help_text=f.help),
    "duration": lambda f: Duration(required=False, help_text=f"{f.help}: {DURATION}"),
    "positive_duration": lambda f: PositiveDuration(required=False, help_text=f"{f.help}: {DURATION}"),
    "boolean": lambda f: opt(s.BooleanField, help_text=f.help),
    "dependencies": lambda f: DependencyItem(
        many=True, required=False, allow_null=True, max_length=f.max_items, help_text=f.help
    ),
    "retry_policy": lambda f: RetryPolicy(required=False, allow_null=True, help_text=f.help),
    "metadata": lambda f: s.DictField(
        child=s.CharField(allow_blank=True), required=False, allow_null=True, help_text=f.help
    ),
}


def serializer(name: str, fields: tuple[request.Field, ...]) -> type[s.Serializer]:
    """The serializer drf-spectacular describes a request object by, made from its definition."""
    return type(name, (s.Serializer,), {f.name: KIND_SCHEMAS[f.kind](f) for f in fields})


DependencyItem = serializer("DependencyItem", request.DEPENDENCY)
RetryPolicy = serializer("RetryPolicy", request.RETRY_POLICY)
EnqueueRequest = serializer("EnqueueRequest", request.TASK)


class Encryption(s.Serializer):
    at_rest = s.CharField(allow_null=True, help_text="the key id the row is sealed under (CONVEYOR_ENCRYPTION_KEYS)")
    end_to_end = s.CharField(
        allow_null=True, help_text="the key id the producer sealed the payload under (the SDK's encryptor)"
    )
    error = s.CharField(
        allow_null=True, help_text="why a sealed value could not be opened on this node (it then reads empty)"
    )


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
    suspect = s.BooleanField(
        help_text="in flight when a worker's connection dropped (docs/architecture.md, Crashed workers)"
    )
    encryption = Encryption()


class AttemptWorker(s.Serializer):
    session = s.CharField(allow_null=True, help_text="the worker session (a webhook's: webhook:NAME); null: unknown")
    labels = s.DictField(help_text="the labels the worker sent in its hello")


class TaskAttempt(s.Serializer):
    number = s.IntegerField(help_text="the attempt's place in the task's history, 1 first")
    started_at = s.DateTimeField(allow_null=True)
    finished_at = s.DateTimeField()
    worker = AttemptWorker()
    node = s.CharField(allow_null=True, help_text="the node the worker was connected to (or held the lease)")
    outcome = s.ChoiceField(["completed", "retry", "failed", "released", "crashed", "lease-expired"])
    error = s.CharField(allow_blank=True, help_text="the error as the worker sent it, traceback included")


class TaskDetail(Task):
    attempts = TaskAttempt(many=True, help_text="the last ATTEMPTS_KEPT attempts, oldest first")


class Error(s.Serializer):
    error = s.CharField(help_text="invalid_argument, not_found, already_exists, failed_precondition, ...")
    message = s.CharField()
    field = s.CharField(required=False)
    index = s.IntegerField(required=False)


class TaskList(s.Serializer):
    tasks = EnqueueRequest(many=True, min_length=1, max_length=1000)


class TaskListResponse(s.Serializer):
    tasks = Task(many=True)


class BatchItem(s.Serializer):
    index = s.IntegerField()
    created = s.BooleanField(required=False, help_text="false: the id existed; the stored task is returned")
    task = Task(required=False, help_text="absent with `Prefer: return=minimal`")
    id = s.CharField(required=False, help_text="with `Prefer: return=minimal`: the stored task's id")
    state = s.CharField(required=False, help_text="with `Prefer: return=minimal`: the state it was stored in")
    error = Error(required=False)


class BatchResults(s.Serializer):
    results = BatchItem(many=True)


class TaskPage(s.Serializer):
    tasks = Task(many=True)
    next_page_token = s.CharField(allow_null=True, help_text="set only when the page is full")


class RescheduleRequest(s.Serializer):
    process_at = opt(s.DateTimeField, help_text="exactly one of process_at and process_in")
    process_in = Duration(required=False)


class IdsRequest(s.Serializer):
    ids = s.ListField(child=s.CharField(), min_length=1, max_length=1000)
    process_at = opt(s.DateTimeField, help_text="reschedule only")
    process_in = Duration(required=False, help_text="reschedule only")


class IdResult(s.Serializer):
    id = s.CharField()
    ok = s.BooleanField()
    task = Task(required=False)
    error = Error(required=False)


class IdResults(s.Serializer):
    results = IdResult(many=True)


@extend_schema_field({"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1e6})
class Rate(s.FloatField):
    """Tasks per second, > 0."""


class RateLimit(s.Serializer):
    queue = s.CharField(read_only=True)
    rate = Rate(help_text="tasks per second, > 0")
    burst = s.IntegerField(required=False, allow_null=True, min_value=1, max_value=1_000_000, help_text="default 1")


class ConcurrencyLimit(s.Serializer):
    queue = s.CharField(read_only=True)
    limit = s.IntegerField(min_value=1, max_value=1_000_000)


class QueueRateLimit(s.Serializer):
    rate = s.FloatField()
    burst = s.IntegerField()


class Queue(s.Serializer):
    name = s.CharField()
    paused = s.BooleanField()
    policy = s.ChoiceField(["fifo", "lifo", "random"])
    counts = s.DictField(child=s.IntegerField())
    total = s.IntegerField()
    oldest_due_at = s.DateTimeField(allow_null=True)
    rate_limit = QueueRateLimit(allow_null=True)
    concurrency_limit = s.IntegerField(allow_null=True)


class QueueList(s.Serializer):
    queues = Queue(many=True)


class PolicyRequest(s.Serializer):
    policy = s.ChoiceField(["fifo", "lifo", "random"])


class QueuePaused(s.Serializer):
    queue = s.CharField()
    paused = s.BooleanField()


class QueuePolicy(s.Serializer):
    queue = s.CharField()
    policy = s.ChoiceField(["fifo", "lifo", "random"])


class Limits(s.Serializer):
    rate_limits = RateLimit(many=True)
    concurrency_limits = ConcurrencyLimit(many=True)


class GroupConfigRequest(s.Serializer):
    queue = s.RegexField(QUEUE_PATTERN, max_length=100)
    group = opt(s.CharField, max_length=200, help_text='"" or absent: the queue-wide default')
    max_size = opt(s.IntegerField, min_value=1, max_value=100_000, help_text="default 100")
    max_delay = PositiveDuration(required=False, help_text="default 1m")
    grace = PositiveDuration(required=False, help_text="default 10s")


class GroupConfig(s.Serializer):
    queue = s.CharField()
    group = s.CharField(allow_blank=True)
    max_size = s.IntegerField()
    max_delay = s.FloatField(help_text="seconds")
    grace = s.FloatField(help_text="seconds")


class GroupStat(s.Serializer):
    queue = s.CharField()
    group = s.CharField()
    count = s.IntegerField()
    oldest = s.DateTimeField()
    newest = s.DateTimeField()


class Groups(s.Serializer):
    configs = GroupConfig(many=True)
    groups = GroupStat(many=True)


class CronOptions(s.Serializer):
    """Options of the tasks an entry enqueues."""

    priority = opt(s.IntegerField, min_value=0, max_value=9)
    max_retry = opt(s.IntegerField, min_value=0, max_value=10000)
    timeout = PositiveDuration(required=False)
    retention = Duration(required=False)
    expires_in = PositiveDuration(required=False)
    metadata = s.DictField(child=s.CharField(allow_blank=True), required=False, allow_null=True)
    unique_ttl = PositiveDuration(required=False, help_text="one live run per entry, for this long")
    concurrency_key = opt(s.CharField, max_length=200)
    group = opt(s.CharField, max_length=200)


class CronRequest(s.Serializer):
    id = s.RegexField(TASK_ID_PATTERN, max_length=100, help_text="taken from the path on PUT")
    spec = s.CharField(help_text="5 fields (minute first) or 6 (seconds first), or @hourly etc.")
    task_type = s.CharField(max_length=200)
    queue = opt(s.RegexField, regex=QUEUE_PATTERN, max_length=100, help_text="default: default")
    json = s.JSONField(required=False, allow_null=True)
    payload = opt(s.CharField, help_text="base64 bytes (instead of json)")
    content_type = opt(s.CharField)
    timezone = opt(s.CharField, help_text="IANA name; default UTC")
    options = CronOptions(required=False, allow_null=True)
    paused = opt(s.BooleanField)


class CronPutRequest(CronRequest):
    id = opt(s.RegexField, regex=TASK_ID_PATTERN, max_length=100, help_text="the id in the path; may be left out")


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
    encryption = Encryption()
    next_run_at = s.DateTimeField()
    last_run_at = s.DateTimeField(allow_null=True)


class CronList(s.Serializer):
    entries = CronEntry(many=True)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 1000},
        "minProperties": 1,
        "description": "queue name -> weight (1-1000)",
        "example": {"email": 1},
    }
)
class QueueWeights(s.DictField):
    """At least one queue with its weight."""


class WebhookRequest(s.Serializer):
    name = s.RegexField(NAME_PATTERN, max_length=100, help_text="taken from the path on PUT")
    url = s.URLField(max_length=2000, help_text="http:// or https://, no credentials")
    queues = QueueWeights()
    concurrency = opt(s.IntegerField, min_value=1, max_value=10_000, help_text="default 10")
    secrets = s.ListField(
        child=s.CharField(max_length=500),
        required=False,
        allow_null=True,
        max_length=2,
        help_text="newest first; write-only",
    )
    secret = opt(s.CharField, max_length=500, help_text="one secret (not with secrets); write-only")
    batch_types = s.ListField(child=s.CharField(max_length=200), required=False, allow_null=True)
    request_timeout = PositiveDuration(required=False)
    paused = opt(s.BooleanField)


class WebhookPutRequest(WebhookRequest):
    name = opt(s.RegexField, regex=NAME_PATTERN, max_length=100, help_text="the name in the path; may be left out")


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


class HistoryRow(s.Serializer):
    minute = s.DateTimeField()
    queue = s.CharField()
    enqueued = s.IntegerField()
    completed = s.IntegerField()
    failed = s.IntegerField(help_text="attempts retried or archived")
    backlog = s.IntegerField(help_text="due waiting tasks, sampled by the reaper")


class History(s.Serializer):
    series = HistoryRow(many=True)


ERRORS = {
    "400": "invalid argument: `field` names what was refused ('' when the body is not a JSON object)",
    "401": "no bearer token, or a wrong one (only when CONVEYOR_API_TOKENS is set)",
    "403": "the token lacks the scope this call needs (`scope`) or may not use the queue (`queue`);"
    " read-only mode refuses this change; or the session user is not staff",
    "404": "no such task, cron entry or webhook registration",
    "415": "the body is not application/json",
}


PATH_PARAMS = {
    "task_id": {"type": "string", "pattern": TASK_ID_PATTERN, "maxLength": 100},
    "entry_id": {"type": "string", "pattern": TASK_ID_PATTERN, "maxLength": 100},
    "name": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 100},
}


class ConveyorSchema(AutoSchema):
    """Every operation also documents the errors any request to it can meet.

    Request bodies are closed (``additionalProperties: false``): the API
    refuses unknown fields, so a typo is an error rather than a silent default.
    Path parameters carry the patterns the broker enforces.
    """

    def get_override_parameters(self) -> list[Any]:
        defaults = [
            OpenApiParameter(name, schema, OpenApiParameter.PATH)
            for name, schema in PATH_PARAMS.items()
            if "{" + name + "}" in self.path
        ]
        return defaults + list(super().get_override_parameters())

    def _map_serializer(self, serializer: Any, direction: Any, bypass_extensions: bool = False) -> dict[str, Any]:
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and "properties" in schema:
            schema["additionalProperties"] = False
        return schema

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(Error, ERRORS[code]), code, direction=direction
                )
        return responses

    def _error_codes(self) -> list[str]:
        has_body = self.method in ("POST", "PUT", "PATCH")
        has_input = has_body or "{" in self.path or any(p.location == "query" for p in self.get_override_parameters())
        codes = ["400"] if has_input else []
        codes += ["401", "403"]
        if "{" in self.path:
            codes.append("404")
        if has_body:
            codes.append("415")
        return codes
