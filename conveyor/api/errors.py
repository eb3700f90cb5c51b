"""Map Conveyor errors to HTTP responses (one place for the whole API)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.exceptions import APIException, NotAuthenticated
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from conveyor.exceptions import ConveyorError, InvalidArgument, Unavailable, printable


def error_body(exc: ConveyorError) -> dict[str, Any]:
    """The JSON error shape; text that echoes the input is made printable (a lone
    surrogate has no UTF-8 encoding, and the answer could not be written)."""
    body: dict[str, Any] = {"error": exc.code, "message": printable(exc.message)}
    if isinstance(exc, InvalidArgument):
        body["field"] = printable(exc.field)
    details = {k: printable(v) if isinstance(v, str) else v for k, v in exc.details.items()}
    body.update({k: v for k, v in details.items() if k not in body})
    return body


def body_too_large() -> InvalidArgument:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return InvalidArgument("", f"the request body is too large (at most {limit} bytes here)")


DRF_CODES = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    415: "unsupported_media_type",
}


def database_unavailable(exc: BaseException) -> Unavailable | None:
    """The error a request meets while PostgreSQL is down or restarting, as ``Unavailable``.

    Django wraps the driver's errors (``django.db.OperationalError``); the
    node's own connections raise psycopg's (a pool that cannot connect
    raises ``PoolTimeout``, an ``OperationalError`` too).
    """
    import psycopg
    from django import db

    if isinstance(exc, (db.OperationalError, db.InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)):
        return Unavailable(f"the database is unavailable, nothing was changed: try again ({one_line(exc)})")
    return None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def retry_headers(exc: ConveyorError) -> dict[str, str]:
    return {"Retry-After": str(exc.retry_after)} if isinstance(exc, Unavailable) else {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = database_unavailable(exc) or exc
    if isinstance(exc, RequestDataTooBig):
        # Django's limit on a body it reads (DATA_UPLOAD_MAX_MEMORY_SIZE): its own answer is an HTML 400.
        return Response(error_body(body_too_large()), status=413)
    if isinstance(exc, ConveyorError):
        return Response(error_body(exc), status=exc.http_status, headers=retry_headers(exc))
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, APIException):
        status = response.status_code
        if isinstance(exc, NotAuthenticated):
            status = 401  # DRF answers 403 when no authenticator sent a challenge
        detail = exc.detail
        message = printable(detail if isinstance(detail, str) else str(detail))
        response.data = {"error": DRF_CODES.get(status, "error"), "message": message}
        if status == 400 and context.get("request") is not None:
            response.data["field"] = ""  # a body that is not JSON at all
        response.status_code = status
        response["WWW-Authenticate"] = (
            'Bearer realm="conveyor"' if status == 401 else response.get("WWW-Authenticate", "")
        )
        if status != 401:
            del response["WWW-Authenticate"]
    return response
