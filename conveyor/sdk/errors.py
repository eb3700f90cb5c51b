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


class WorkerRefused(ConveyorError):
    """The server closed the worker session and will not take it back (auth, version, protocol)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"server refused the worker session ({code}): {reason}")
        self.code = code
        self.reason = reason


class SkipRetry(Exception):
    """Raise from a handler to fail the task for good (no retries left are used)."""


def api_error(status: int, body: dict[str, Any]) -> APIError:
    code = str(body.get("error") or body.get("code") or "")
    if status == 404 or code == "not_found":
        return NotFound(status, body)
    if code == "already_exists":
        return Duplicate(status, body)
    if status == 401:
        return Unauthenticated(status, body)
    return APIError(status, body)
