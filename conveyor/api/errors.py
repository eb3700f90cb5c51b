"""Map Conveyor errors to HTTP responses (one place for the whole API)."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from conveyor.exceptions import ConveyorError, InvalidArgument


def error_body(exc: ConveyorError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if isinstance(exc, InvalidArgument):
        body["field"] = exc.field
    body.update({k: v for k, v in exc.details.items() if k not in body})
    return body


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ConveyorError):
        return Response(error_body(exc), status=exc.http_status)
    return drf_exception_handler(exc, context)
