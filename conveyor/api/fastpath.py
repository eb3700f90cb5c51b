"""A lean ASGI path for enqueueing, in front of Django.

Enqueueing is the producer's hot path. Through Django and DRF each request
crosses several sync/async thread hops (middleware, the view) before it
reaches the database, which costs more than the insert itself, and DRF's
request parsing and rendering cost a batch of 1000 about a sixth of its
time. This path handles exactly two JSON calls — ``POST /api/v1/tasks`` and
``POST /api/v1/tasks/batch`` — with the same parsing, broker call, rendering, auth and error mapping as the
views, and hands everything else (including browser requests that carry a
session cookie and no bearer token, which need CSRF checks) to Django
unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async

from conveyor.api import render
from conveyor.api.errors import database_unavailable, error_body, retry_headers
from conveyor.api.scopes import body_names, body_queues, screen_enqueue
from conveyor.broker import get_broker, parse
from conveyor.broker.types import ItemResult
from conveyor.exceptions import ConveyorError, InvalidArgument, PermissionDenied
from conveyor.tokens import (
    PRODUCE,
    ApiToken,
    auth_required,
    bearer_from_header,
    find_token,
    require_queues,
    require_scope,
)

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[None],
]
MAX_BODY = 8 * 1024 * 1024
LOOP_BODY_MAX = 64 * 1024  # larger enqueues are parsed and rendered in a database thread

# The answers' JSON: compact, UTF-8 as it is. One encoder made once
# (``json.dumps`` with options builds one per call); NaN as json.dumps
# writes it, since a stored JSON payload may hold one.
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

REST, BATCH = "rest", "batch"
ROUTES = {"/api/v1/tasks": REST, "/api/v1/tasks/batch": BATCH}


def enqueue_rest(data: Any) -> tuple[int, dict[str, Any]]:
    return rest_answer(get_broker().enqueue_one(parse.parse_task(data)))


def rest_answer(result: ItemResult) -> tuple[int, dict[str, Any]]:
    if result.error is not None:
        raise result.error
    return (201 if result.created else 200), render.task(result.task)  # type: ignore[arg-type]


def enqueue_batch(data: Any, minimal: bool = False) -> tuple[int, dict[str, Any]]:
    from conveyor.api.tasks import enqueue_batch

    return 200, enqueue_batch(data, minimal)


HANDLERS = {REST: enqueue_rest, BATCH: enqueue_batch}


class EnqueueFastPath:
    def __init__(self, app: ASGIApp, prefix: str = "/") -> None:
        self.app = app
        # The paths under the prefix conveyor.urls is mounted at.
        self.routes = {prefix.rstrip("/") + path: kind for path, kind in ROUTES.items()}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = self._route(scope)
        if kind is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            _, payload = _error(kind, InvalidArgument("", "request body too large"))
            await _respond(send, 413, payload)
            return
        minimal = kind == BATCH and render.wants_minimal(_header(scope, b"prefer"))
        token = _token(scope) if auth_required() else None
        if auth_required() and token is None:
            status, payload = _unauthenticated(kind)
            await _respond(send, status, payload, [(b"www-authenticate", b'Bearer realm="conveyor"')])
            return
        try:
            require_scope(token, PRODUCE)
        except PermissionDenied as exc:
            await _respond(send, *_error(kind, exc))
            return
        try:
            # As the views read bodies: strict JSON (no NaN), an empty body is {}.
            data = json.loads(body or b"{}", parse_constant=_not_json)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, absurd nesting
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            status, payload = _error(kind, InvalidArgument("", f"the request body is not JSON: {reason}"))
        else:
            try:
                if token is not None and token.queues is not None:  # (else every queue is allowed)
                    require_queues(token, body_queues(data, many=kind == BATCH), "enqueue into")
                    names = body_names(data, many=kind == BATCH)
                    await sync_to_async(screen_enqueue, thread_sensitive=False)(token, names, many=kind == BATCH)
                status, payload = await _run(kind, data, len(body), minimal)
            except Exception as exc:
                error = database_unavailable(exc) or exc
                if not isinstance(error, ConveyorError):
                    raise
                status, payload = _error(kind, error)
                extra = [(k.lower().encode(), v.encode()) for k, v in retry_headers(error).items()]
                await _respond(send, status, payload, extra)
                return
        await _respond(send, status, payload, [(b"preference-applied", render.MINIMAL.encode())] if minimal else None)

    def _route(self, scope: dict[str, Any]) -> str | None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return None
        kind = self.routes.get(scope.get("path", ""))
        if kind is None:
            return None
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if content_type != b"application/json":
            return None
        # A browser session (cookie, no bearer token) goes through Django for
        # CSRF, and a page's request (Origin) for the same-site rule.
        if b"origin" in headers or (b"cookie" in headers and b"authorization" not in headers):
            return None
        return kind


async def _run(kind: str, data: Any, size: int, minimal: bool = False) -> tuple[int, dict[str, Any]]:
    from conveyor.dispatch.node import current_node

    fn = functools.partial(enqueue_batch, minimal=True) if minimal else HANDLERS[kind]
    node = current_node()
    if node is None:
        return await sync_to_async(fn, thread_sensitive=False)(data)
    on_loop = kind == REST and size <= LOOP_BODY_MAX
    if on_loop and node.leaser is not None:
        # One INSERT on the node's own connection, from the loop: no thread
        # hops (a task that needs more than that goes to a database thread,
        # and so does a large body: decoding and encoding its payload would
        # hold up the loop).
        spec = parse.parse_task(data)
        result = await node.leaser.enqueue(spec)
        if result is None:
            result = await node.db.run(get_broker().enqueue_one, spec)
        return rest_answer(result)
    return await node.db.run(fn, data)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin1")
    return None


def _token(scope: dict[str, Any]) -> ApiToken | None:
    header = _header(scope, b"authorization")
    token = bearer_from_header(header) if header is not None else None
    return find_token(token) if token else None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _error(kind: str, exc: ConveyorError) -> tuple[int, dict[str, Any]]:
    return exc.http_status, error_body(exc)


def _unauthenticated(kind: str) -> tuple[int, dict[str, Any]]:
    message = "a valid bearer token (or a staff login) is required"
    return 401, {"error": "unauthenticated", "message": message}


async def _read_body(receive: Any) -> bytes | None:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(
    send: Any, status: int, payload: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = _compact(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
