"""What an API token's scopes and queues allow on the REST API (conveyor.tokens).

A view's HTTP method says which scope it needs: ``POST`` to an enqueue view
(``producer = True``) needs ``produce``; a read (GET, HEAD, OPTIONS) needs
``read`` (or what the view's ``read_scopes`` names); every other call
needs ``admin``. Staff sessions are not tokens and are not scoped.
"""

from __future__ import annotations

from typing import Any

from conveyor.broker import get_broker
from conveyor.exceptions import TaskNotFound
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
