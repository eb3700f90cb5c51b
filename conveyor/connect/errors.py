"""Domain errors as Connect errors: the code from ``ConveyorError.connect_code``
(the runtime sets the HTTP status from Connect's table), and a refused field
named by its JSON name in the contract (``dependsOn[0].taskId``)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from conveyor.exceptions import ConveyorError, InvalidArgument


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
    return ConnectError(Code(exc.connect_code), message)


def item_error(exc: ConveyorError) -> str:
    """A batch item's error as the contract's string field: ``code: message``."""
    error = connect_error(exc)
    return f"{error.code.value}: {error.message}"


class ConveyorErrors:
    """Interceptor: a ``ConveyorError`` from a handler becomes its Connect error."""

    async def intercept_unary(
        self, call_next: Callable[[Any, RequestContext], Awaitable[Any]], request: Any, ctx: RequestContext, /
    ) -> Any:
        try:
            return await call_next(request, ctx)
        except ConveyorError as exc:
            raise connect_error(exc) from None

    async def intercept_server_stream(
        self, call_next: Callable[[Any, RequestContext], AsyncIterator[Any]], request: Any, ctx: RequestContext, /
    ) -> AsyncIterator[Any]:
        try:
            async for message in call_next(request, ctx):
                yield message
        except ConveyorError as exc:
            raise connect_error(exc) from None
