"""One exception hierarchy, and how each error surfaces on every interface.

Every broker error is a ``ConveyorError`` with a stable ``code``. The REST
API, the Connect aliases, the worker WebSocket and the CLI all translate
through ``ConveyorError.http_status`` / ``connect_code`` so the mapping lives
in one place.
"""

from __future__ import annotations

from typing import Any


def printable(text: str) -> str:
    """*text* that encodes as UTF-8: a message echoing a lone surrogate of the input would not."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class ConveyorError(Exception):
    code = "internal"
    http_status = 500
    connect_code = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details}


class InvalidArgument(ConveyorError):
    """Bad input; ``field`` names the offending field (dotted path)."""

    code = "invalid_argument"
    http_status = 400
    connect_code = "invalid_argument"

    def __init__(self, field: str, message: str, *, index: int | None = None) -> None:
        text = f"{field}: {message}" if field else message
        if index is not None:
            text = f"item {index}: {text}"
        super().__init__(text, field=field)
        self.field = field
        self.reason = message
        self.index = index
        if index is not None:
            self.details["index"] = index


class TaskNotFound(ConveyorError):
    code = "not_found"
    http_status = 404
    connect_code = "not_found"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} not found", task_id=task_id)
        self.task_id = task_id


class NotFound(ConveyorError):
    """A named object other than a task (cron entry, webhook) does not exist."""

    code = "not_found"
    http_status = 404
    connect_code = "not_found"


class TaskIdTaken(ConveyorError):
    """An enqueue naming an id held by a task the caller may not see (another queue's)."""

    code = "already_exists"
    http_status = 409
    connect_code = "already_exists"

    def __init__(self, task_id: str, *, index: int | None = None) -> None:
        text = f"task id {task_id!r} is taken by a task this token may not see"
        if index is not None:
            text = f"item {index}: {text}"
        super().__init__(text, task_id=task_id)
        if index is not None:
            self.details["index"] = index


class DuplicateTask(ConveyorError):
    code = "already_exists"
    http_status = 409
    connect_code = "already_exists"

    def __init__(self, unique_key: str, holder_id: str | None = None, *, index: int | None = None) -> None:
        text = f"unique key {unique_key!r} is held by a live task"
        if holder_id:
            text += f" ({holder_id})"
        if index is not None:
            text = f"item {index}: {text}"
        super().__init__(text, unique_key=unique_key)
        self.unique_key = unique_key
        self.holder_id = holder_id
        self.index = index
        if index is not None:
            self.details["index"] = index


class InvalidState(ConveyorError):
    code = "failed_precondition"
    http_status = 409
    connect_code = "failed_precondition"

    def __init__(self, task_id: str, state: str, action: str) -> None:
        super().__init__(f"cannot {action} task {task_id} in state {state}", task_id=task_id, state=state)
        self.task_id = task_id
        self.state = state


class DependentsWaiting(InvalidState):
    """A task that unfinished tasks still wait on cannot be deleted (their wait would change meaning)."""

    def __init__(self, task_id: str, state: str, dependents: list[str]) -> None:
        shown = ", ".join(dependents[:3]) + (", ..." if len(dependents) > 3 else "")
        ConveyorError.__init__(
            self, f"cannot delete task {task_id}: unfinished tasks wait on it ({shown})", task_id=task_id, state=state
        )
        self.task_id = task_id
        self.state = state


class LeaseLost(ConveyorError):
    code = "lease_lost"
    http_status = 409
    connect_code = "failed_precondition"

    def __init__(self, task_id: str, lease_id: str | None = None) -> None:
        super().__init__(f"lease on task {task_id} was lost", task_id=task_id)
        self.task_id = task_id
        self.lease_id = lease_id


class KeyUnavailable(ConveyorError):
    """A stored value cannot be opened or sealed here: its key id is not in this
    node's ``CONVEYOR_ENCRYPTION_KEYS``, or the key there is not the one it was
    sealed with. Nothing changed; a node holding the key can do it."""

    code = "key_unavailable"
    http_status = 503
    connect_code = "unavailable"

    def __init__(self, message: str, *, key_id: str | None = None, **details: Any) -> None:
        super().__init__(message, key_id=key_id, **details)
        self.key_id = key_id


class Unauthenticated(ConveyorError):
    code = "unauthenticated"
    http_status = 401
    connect_code = "unauthenticated"


class PermissionDenied(ConveyorError):
    code = "permission_denied"
    http_status = 403
    connect_code = "permission_denied"


class MissingScope(PermissionDenied):
    """An API token that does not grant what the call needs (``scope``: the scope it lacks)."""

    def __init__(self, needed: tuple[str, ...], has: frozenset[str]) -> None:
        wanted = " or ".join(repr(s) for s in needed)
        held = ", ".join(sorted(has)) or "none"
        super().__init__(f"this token lacks the {wanted} scope (its scopes: {held})", scope=needed[0])
        self.needed = needed


class QueueNotAllowed(PermissionDenied):
    """An API token limited to some queues, used on another one."""

    def __init__(self, queue: str, allowed: frozenset[str], action: str) -> None:
        shown = ", ".join(sorted(allowed))
        super().__init__(f"this token may only {action} queues {shown}, not {queue!r}", queue=queue)
        self.queue = queue


class ReadOnly(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("the server is in read-only mode")


class Unavailable(ConveyorError):
    """The database cannot be reached or gave up on the statement: nothing was
    stored, and the same request may be sent again after ``retry_after`` seconds."""

    code = "unavailable"
    http_status = 503
    connect_code = "unavailable"
    retry_after = 2


# Connect protocol: error code -> HTTP status (connectrpc.com/docs/protocol).
CONNECT_HTTP_STATUS = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}
