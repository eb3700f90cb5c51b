"""Errors the SDK raises."""

from __future__ import annotations

from typing import Any


class ConveyorError(Exception):
    """Base class of every SDK error."""


class APIError(ConveyorError):
    """The server refused a request; ``code`` and ``field`` say why."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        self.code = str(body.get("error") or body.get("code") or "unknown")
        self.field = body.get("field")
        self.index = body.get("index")
        message = str(body.get("message") or body)
        super().__init__(f"{status} {self.code}: {message}")
        self.message = message


class NotFound(APIError):
    pass


class Duplicate(APIError):
    pass


class Unauthenticated(APIError):
    pass


class PermissionDenied(APIError):
    """403: the token lacks the scope the call needs (``body["scope"]``), may not use the
    queue (``body["queue"]``), or the server is read-only."""


class TransportError(ConveyorError):
    """No answer came: the network failed before, while or after the request was sent.

    The server may have acted on the request (an enqueue may be stored):
    it is never sent again on its own; retry an enqueue with a fixed ``id``
    to make that safe. ``__cause__`` is urllib3's exception.
    """


class ConnectError(TransportError):
    """No connection could be made (refused, name not found, connect timeout,
    certificate refused, proxy unreachable): the request was not sent."""


class WorkerRefused(ConveyorError):
    """The server closed the worker session and will not take it back (auth, version, protocol)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"server refused the worker session ({code}): {reason}")
        self.code = code
        self.reason = reason


class SkipRetry(Exception):
    """Raise from a handler to fail the task for good (no retries left are used)."""


class Fail(Exception):
    """Raise from a handler to fail the task with *error* stored verbatim as its last error.

    Other exceptions are stored as ``Type: message``; this one as given (a
    traceback, a structured text). Retried like any failure; with
    ``skip_retry=True`` archived at once, like ``SkipRetry``.
    """

    def __init__(self, error: str, *, skip_retry: bool = False) -> None:
        super().__init__(error)
        self.error = error
        self.skip_retry = skip_retry


class Release(Exception):
    """Raise from a handler to give the task back untouched: pending again, no retry spent.

    For a worker that cannot run the task (a type it has no function for,
    code it does not have yet), so that another worker can.
    """


def api_error(status: int, body: dict[str, Any]) -> APIError:
    code = str(body.get("error") or body.get("code") or "")
    if status == 404 or code == "not_found":
        return NotFound(status, body)
    if code == "already_exists":
        return Duplicate(status, body)
    if status == 401:
        return Unauthenticated(status, body)
    if status == 403:
        return PermissionDenied(status, body)
    return APIError(status, body)
