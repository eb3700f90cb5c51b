"""What an API token's scopes and queues allow on the REST API (conveyor.tokens).

A view's HTTP method says which scope it needs: ``POST`` to an enqueue view
(``producer = True``) needs ``produce``; a read (GET, HEAD, OPTIONS) needs
``read`` (or what the view's ``read_scopes`` names); every other call
needs ``admin``. Staff sessions are not tokens and are not scoped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from conveyor.broker import get_broker
from conveyor.broker.parse import parse_payload
from conveyor.exceptions import DuplicateTask, InvalidArgument, TaskIdTaken, TaskNotFound
from conveyor.models import Task
from conveyor.sdk.encryption import content_key
from conveyor.states import INCOMPLETE
from conveyor.tokens import ADMIN, PRODUCE, READ, ApiToken, require_queues, require_scope

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
BATCH_ROUTES = ("tasks-batch", "tasks-tx")  # url names of the enqueue views that take {"tasks": [...]}


def request_token(request: Any) -> ApiToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


def required_scopes(method: str, view: Any) -> tuple[str, ...]:
    if method == "POST" and getattr(view, "producer", False):
        return (PRODUCE,)
    if method in SAFE_METHODS:
        return tuple(getattr(view, "read_scopes", (READ,)))
    return (ADMIN,)


def check_token(request: Any, view: Any) -> None:
    """Refuse (403) a token whose scopes or queues do not cover this call."""
    token = request_token(request)
    if token is None:
        return
    require_scope(token, *required_scopes(request.method, view))
    if token.queues is None:
        return
    if request.method == "POST" and getattr(view, "producer", False):
        match = getattr(request, "resolver_match", None)
        many = match is not None and match.url_name in BATCH_ROUTES
        require_queues(token, body_queues(request.data, many=many), "enqueue into")
        screen_enqueue(token, body_names(request.data, many=many), many=many)
    elif request.method in SAFE_METHODS and "task_id" in view.kwargs:
        task_id = view.kwargs["task_id"]
        # A task in another queue is answered as one that does not exist:
        # a limited producer learns nothing of other queues' tasks.
        if not token.serves(get_broker().get_task(task_id).queue):
            raise TaskNotFound(task_id)


def body_queues(data: Any, *, many: bool) -> list[str]:
    """The queues an enqueue body names (``default`` when a task names none).

    Items too malformed to name a queue are left out: the enqueue refuses
    them itself and stores nothing of them.
    """
    items = data.get("tasks") if many and isinstance(data, dict) else [data]
    if not isinstance(items, list):
        return []
    queues = []
    for item in items:
        if isinstance(item, dict):
            queue = item.get("queue") or "default"
            if isinstance(queue, str):
                queues.append(queue)
    return queues


@dataclass(frozen=True)
class TaskNames:
    """What of existing tasks an enqueue item may name: its own id, the tasks it depends on, its unique key."""

    id: str | None
    depends_on: tuple[str, ...] = ()
    unique_key: str | None = None


def body_names(data: Any, *, many: bool) -> list[TaskNames]:
    """The ids and keys each item of an enqueue body names (malformed ones are left to the parser)."""
    items = data.get("tasks") if many and isinstance(data, dict) else [data]
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        deps = item.get("depends_on")
        names = [d if isinstance(d, str) else d.get("task_id") if isinstance(d, dict) else None
                 for d in (deps if isinstance(deps, list) else [])]  # fmt: skip
        task_id = item.get("id")
        out.append(TaskNames(task_id if isinstance(task_id, str) else None,
                             tuple(n for n in names if isinstance(n, str)), body_unique_key(item)))  # fmt: skip
    return out


def body_unique_key(item: dict[str, Any]) -> str | None:
    """The unique key an enqueue item claims: its ``unique_key``, or with ``unique: true`` its content's."""
    key, task_type = item.get("unique_key"), item.get("type")
    if key:
        return key if isinstance(key, str) else None
    if item.get("unique") is not True or not isinstance(task_type, str):
        return None
    try:
        return content_key(task_type, parse_payload(item)[0])
    except InvalidArgument:
        return None


def screen_enqueue(token: ApiToken | None, items: Sequence[TaskNames], *, many: bool = False) -> None:
    """Refuse an enqueue by a queue-limited token that names another queue's task.

    Re-sending an existing id answers with the stored task, a dependency
    on a task that exists is taken where a missing one is refused, and a
    unique key a live task holds is refused naming that task: each way the
    token would see, or learn of, a task of a queue it may not use. An id
    such a task holds is refused as taken (409, the task not shown); a
    dependency on one as unknown, word for word as a missing task; its
    unique key as held, by no task named.
    """
    if token is None or token.queues is None:
        return
    ids = {name for item in items for name in (item.id, *item.depends_on) if name}
    keys = {item.unique_key for item in items if item.unique_key}
    if not ids and not keys:
        return
    foreign = Task.objects.exclude(queue__in=token.queues)
    taken = set(foreign.filter(id__in=ids).values_list("id", flat=True)) if ids else set()
    held = set(live_claims(foreign, keys).values_list("unique_key", flat=True)) if keys else set()
    for index, item in enumerate(items):
        at = index if many else None
        if item.id in taken:
            raise TaskIdTaken(item.id, index=at)  # type: ignore[arg-type]
        for j, name in enumerate(item.depends_on):
            if name in taken:
                raise InvalidArgument(f"depends_on[{j}].task_id", f"unknown task {name}", index=at)
        if item.unique_key in held:
            raise DuplicateTask(item.unique_key, index=at)  # type: ignore[arg-type]


def live_claims(tasks: Any, keys: set[str]) -> Any:
    """The tasks of *tasks* holding a live claim on one of *keys* (a claim with a TTL lapses at unique_until)."""
    now = get_broker().now()
    live = Q(unique_until__isnull=True) | Q(unique_until__gt=now)
    return tasks.filter(live, unique_key__in=keys, state__in=INCOMPLETE)
