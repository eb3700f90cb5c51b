"""Domain errors as Connect errors: the code from ``ConveyorError.connect_code``
(the runtime sets the HTTP status from Connect's table), and a refused field
named by its JSON name in the contract (``dependsOn[0].taskId``)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from connectrpc.code import Code
from connectrpc.compat import google_protobuf_json_codec
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from conveyor.api.errors import database_unavailable, retry_headers
from conveyor.exceptions import ConveyorError, InvalidArgument, printable


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def json_path(field: str) -> str:
    """``depends_on[0].task_id`` -> ``dependsOn[0].taskId``."""
    return re.sub(r"[A-Za-z0-9_]+", lambda m: camel(m.group(0)), field)


@contextmanager
def fields_named(names: Mapping[str, str]) -> Iterator[None]:
    """Where a message's field differs from the broker's name for it, say the message's."""
    try:
        yield
    except InvalidArgument as exc:
        head = re.match(r"[A-Za-z0-9_]*", exc.field).group(0)  # type: ignore[union-attr]
        renamed = names.get(exc.field) or (names[head] + exc.field[len(head) :] if head in names else None)
        if renamed is None:
            raise
        raise InvalidArgument(renamed, exc.reason, index=exc.index) from None


def connect_error(exc: ConveyorError) -> ConnectError:
    message = exc.message
    if isinstance(exc, InvalidArgument) and exc.field:
        message = InvalidArgument(json_path(exc.field), exc.reason, index=exc.index).message
    return ConnectError(Code(exc.connect_code), printable(message))


class ProtoJSON:
    """proto3 JSON (the runtime's codec for Google's protobuf, refusing unknown
    fields) whose decode errors are invalid_argument with a printable message."""

    def __init__(self) -> None:
        self._codec = google_protobuf_json_codec(ignore_unknown_fields=False)

    def name(self) -> str:
        return self._codec.name()

    def encode(self, message: Any) -> bytes:
        return self._codec.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self._codec.decode(data, message_class)
        except Exception as exc:  # any parse failure is the client's: ParseError, RecursionError, bad UTF-8
            raise ConnectError(Code.INVALID_ARGUMENT, printable(f"unmarshal message: {exc}")) from exc


def item_error(exc: ConveyorError) -> str:
    """A batch item's error as the contract's string field: ``code: message``."""
    error = connect_error(exc)
    return f"{error.code.value}: {error.message}"


def as_connect_error(exc: Exception, ctx: RequestContext) -> Exception:
    """A domain error (or the database's absence) as its Connect error; anything else unchanged."""
    error = database_unavailable(exc) or exc
    if not isinstance(error, ConveyorError):
        return exc
    for name, value in retry_headers(error).items():
        ctx.response_headers[name] = value
    return connect_error(error)


class ConveyorErrors:
    """Interceptor: a ``ConveyorError`` from a handler becomes its Connect error."""

    async def intercept_unary(
        self, call_next: Callable[[Any, RequestContext], Awaitable[Any]], request: Any, ctx: RequestContext, /
    ) -> Any:
        try:
            return await call_next(request, ctx)
        except Exception as exc:
            error = as_connect_error(exc, ctx)
            if error is exc:
                raise
            raise error from None

    async def intercept_server_stream(
        self, call_next: Callable[[Any, RequestContext], AsyncIterator[Any]], request: Any, ctx: RequestContext, /
    ) -> AsyncIterator[Any]:
        try:
            async for message in call_next(request, ctx):
                yield message
        except Exception as exc:
            error = as_connect_error(exc, ctx)
            if error is exc:
                raise
            raise error from None
