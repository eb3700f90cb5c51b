"""What an API token's scopes and queues allow on the Connect services (conveyor.tokens).

TaskService's enqueues need ``produce`` and its GetTask ``read`` or
``produce``; AdminService's reads (and WatchEvents) need ``read``, its other
methods ``admin``; WorkerService needs ``consume``. WebhookService takes no
API token at all: each delivery's lease token is its credential.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectrpc.request import RequestContext

from conveyor.api.scopes import TaskNames, screen_enqueue
from conveyor.connect.admin import READS
from conveyor.exceptions import TaskNotFound
from conveyor.tokens import ADMIN, CONSUME, PRODUCE, READ, ApiToken, authenticate, require_queues

TASK_SCOPES = {"Enqueue": (PRODUCE,), "EnqueueBatch": (PRODUCE,), "EnqueueTx": (PRODUCE,), "GetTask": (READ, PRODUCE)}


def needed_scopes(service: str, method: str) -> tuple[str, ...]:
    if service == "conveyor.v1.TaskService":
        return TASK_SCOPES.get(method, (ADMIN,))
    if service == "conveyor.v1.WorkerService":
        return (CONSUME,)
    if service == "conveyor.v1.AdminService" and method in READS:
        return (READ,)
    return (ADMIN,)


def request_token(ctx: RequestContext) -> ApiToken | None:
    return authenticate(ctx.request_headers.get("authorization", ""))


def _queue(message: Any) -> str:
    return message.queue or "default"


def check_enqueue(token: ApiToken, request: Any) -> None:
    require_queues(token, [_queue(request)], "enqueue into")


def check_enqueue_many(token: ApiToken, request: Any) -> None:
    require_queues(token, [_queue(t) for t in request.tasks], "enqueue into")


def check_task_read(token: ApiToken, request: Any, response: Any) -> None:
    # A task in another queue is answered as one that does not exist.
    if not token.serves(response.task.queue):
        raise TaskNotFound(request.id)


def _names(message: Any) -> TaskNames:
    deps = tuple(d.task_id for d in message.depends_on if d.task_id)
    return TaskNames(message.task_id or None, deps, message.unique_key or None)


def screen_one(token: ApiToken, request: Any) -> None:
    screen_enqueue(token, [_names(request)])


def screen_many(token: ApiToken, request: Any) -> None:
    screen_enqueue(token, [_names(t) for t in request.tasks], many=True)


# TaskService's handlers, for a queue-limited token: what each request may
# name (checked before the handler runs; the screens read the database),
# and what an answer may show.
REQUEST_CHECKS: dict[str, Callable[[ApiToken, Any], None]] = {
    "enqueue": check_enqueue,
    "enqueue_batch": check_enqueue_many,
    "enqueue_tx": check_enqueue_many,
}
SCREENS: dict[str, Callable[[ApiToken, Any], None]] = {
    "enqueue": screen_one,
    "enqueue_batch": screen_many,
    "enqueue_tx": screen_many,
}
ANSWER_CHECKS: dict[str, Callable[[ApiToken, Any, Any], None]] = {"get_task": check_task_read}
