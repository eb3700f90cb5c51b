"""The enqueue request's shape, described once.

Each field of a task in a JSON request body (REST, the node's fast path, the
CLI's flags and files) is one ``Field`` here: its name, what kind of JSON
value it takes, its limits and what it means. ``conveyor.broker.parse``
reads a body by these definitions, ``conveyor.api.schemas`` builds the
OpenAPI description from them and the CLI takes its flags' help from them.
The rules a value must meet beyond its kind (a queue name's pattern, a
priority's range) are the broker's (``conveyor.broker.validation``); the
limits given here are the same constants, so the schema says what the
broker checks. (The Connect wire's shape is its protobuf message, mapped
onto the same ``TaskSpec`` in ``conveyor.connect.convert``.)
"""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.backoff import POLICIES
from conveyor.broker.validation import MAX_RETRY_LIMIT, ON_FAILURE, QUEUE_NAME, TASK_ID

# The kinds of value a field takes; each has a reader (parse.py) and a schema (api/schemas.py).
KINDS = (
    "text",  # a string; "" and null mean absent
    "name",  # a string matching ``pattern``, "" and null meaning absent
    "json",  # any JSON value
    "base64",  # bytes as a base64 string
    "integer",  # a whole number within ``minimum``..``maximum``
    "choice",  # one of ``choices``
    "time",  # an RFC 3339 timestamp with a time zone
    "duration",  # seconds, or a duration string ("30s", "1h30m"), zero allowed
    "positive_duration",  # the same, longer than zero
    "boolean",
    "dependencies",  # a list of task ids or ``DEPENDENCY`` objects
    "retry_policy",  # a ``RETRY_POLICY`` object
    "metadata",  # an object of string values
)


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    help: str = ""
    required: bool = False
    max_length: int | None = None
    pattern: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    max_items: int | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind


DEPENDENCY = (
    Field("task_id", "name", "the task this one waits for", required=True, max_length=100, pattern=TASK_ID.pattern),
    Field("on_failure", "choice", "when it fails: default block", choices=ON_FAILURE),
)

RETRY_POLICY = (
    Field("kind", "choice", "default exponential", choices=tuple(POLICIES)),
    Field("base", "positive_duration", "backoff base, default 2s"),
    Field("cap", "positive_duration", "backoff cap, default 15m"),
)

TASK = (
    Field("type", "text", "task type, the handler's routing key", required=True, max_length=200),
    Field("queue", "name", "queue name; default: default", max_length=100, pattern=QUEUE_NAME.pattern),
    Field(
        "id",
        "name",
        "your id (default: a new ULID); re-sending it is idempotent",
        max_length=100,
        pattern=TASK_ID.pattern,
    ),
    Field("json", "json", "a JSON payload (any JSON value)"),
    Field("payload", "base64", "base64 bytes (instead of json)"),
    Field("content_type", "text", "application/json for json; application/octet-stream for payload", max_length=100),
    Field("priority", "integer", "1 lowest .. 9 highest; 0 or absent: 4", minimum=0, maximum=9),
    Field("max_retry", "integer", "retries after the first attempt; default 25", minimum=0, maximum=MAX_RETRY_LIMIT),
    Field("process_at", "time", "due time, RFC 3339; not with process_in"),
    Field("process_in", "duration", "delay, e.g. 30s, 5m; not with process_at"),
    Field("expires_at", "time", "archive unless dispatched by then"),
    Field("expires_in", "positive_duration", "archive unless dispatched within this"),
    Field("unique_key", "text", "refuse while another live task holds this key", max_length=255),
    Field("unique_ttl", "positive_duration", "the key's claim lapses after this; needs unique_key or unique"),
    Field("unique", "boolean", "derive the unique key from type and payload"),
    Field("group", "text", "aggregation group (the task waits to be delivered in a batch)", max_length=200),
    Field("concurrency_key", "text", "key for the queue's per-key concurrency limit", max_length=200),
    Field("depends_on", "dependencies", "run after these tasks", max_items=1000),
    Field("timeout", "positive_duration", "per-attempt running time limit"),
    Field("deadline", "time", "absolute running deadline"),
    Field("retention", "duration", "keep the completed row this long"),
    Field("retry_policy", "retry_policy", "how retries back off"),
    Field("metadata", "metadata", "string metadata"),
)

TASK_FIELDS = {f.name: f for f in TASK}


def names(fields: tuple[Field, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in fields)
