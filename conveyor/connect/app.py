"""Conveyor's Connect services, served by Connect RPC's Python runtime.

``mount(app)`` puts them in front of any ASGI application (the node's
Django stack, or a host project's): ``/conveyor.v1.<Service>/<Method>`` goes
to the runtime, which speaks the Connect protocol (JSON and binary
protobuf, unary and server streaming) and gRPC-Web; everything else goes
to *app* unchanged. gRPC itself needs HTTP/2 trailers, which an ASGI server
without the trailers extension (uvicorn, the node's) cannot send: such a request gets
415, as the gRPC spec says for a content type a server does not take.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from connectrpc.code import Code
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from conveyor.api.origin import Refusal, media_type, scope_refusal
from conveyor.conf import conveyor_settings
from conveyor.connect.access import ANSWER_CHECKS, REQUEST_CHECKS, SCREENS, needed_scopes, request_token
from conveyor.connect.admin import ADMIN_SERVICE, READS
from conveyor.connect.convert import refuse_nul
from conveyor.connect.errors import ConveyorErrors, ProtoJSON, connect_error
from conveyor.connect.events import watch_events
from conveyor.connect.tasks import TASK_SERVICE, WEBHOOK_SERVICE
from conveyor.exceptions import ConveyorError
from conveyor.tokens import auth_required, require_scope
from conveyor.v1 import service_connect as rpc

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PREFIX = "/conveyor.v1."
READ_MAX_BYTES = 8 * 1024 * 1024  # as the REST enqueue path's body limit
GRPC_TYPES = ("application/grpc", "application/grpc+")
ACCEPT_POST = (b"accept-post", b"application/json, application/proto, application/grpc-web")
CODECS = "application/json or application/proto"


async def in_db_thread(fn: Callable[[Any], Any], request: Any) -> Any:
    """Run a sync handler where database work belongs: the node's pool, else a thread."""
    from conveyor.dispatch.node import current_node

    node = current_node()
    if node is not None:
        return await node.db.run(fn, request)
    return await sync_to_async(fn, thread_sensitive=False)(request)


class Service:
    """A generated service's methods, each running its sync handler on a database thread."""

    def __init__(self, handlers: Mapping[str, Callable[[Any], Any]], *, queue_limited: bool = False,
                 **streams: Any) -> None:  # fmt: skip
        self._handlers = handlers
        self._streams = streams
        self._queue_limited = queue_limited  # check a queue-limited token's queues (TaskService)

    def __getattr__(self, name: str) -> Any:
        if name in self._streams:
            return checked_stream(self._streams[name])
        handler = self._handlers.get(name)
        if handler is None:
            raise AttributeError(name)

        async def call(request: Any, ctx: RequestContext) -> Any:
            refuse_nul(request)
            token = request_token(ctx) if self._queue_limited else None
            if token is None or token.queues is None:
                return await in_db_thread(handler, request)
            if name in REQUEST_CHECKS:
                REQUEST_CHECKS[name](token, request)
            if name in SCREENS:
                await in_db_thread(lambda message: SCREENS[name](token, message), request)
            response = await in_db_thread(handler, request)
            if name in ANSWER_CHECKS:
                ANSWER_CHECKS[name](token, request, response)
            return response

        return call


def checked_stream(stream: Callable[[Any, RequestContext], AsyncIterator[Any]]) -> Any:
    """A server stream whose request is refused, as a unary call's is, when a string holds NUL."""

    async def call(request: Any, ctx: RequestContext) -> AsyncIterator[Any]:
        refuse_nul(request)
        async for message in stream(request, ctx):
            yield message

    return call


class WorkerSessions:
    """WorkerService.Session: workers hold our WebSocket protocol instead."""

    async def session(self, request: Any, ctx: RequestContext) -> Any:
        raise ConnectError(
            Code.UNIMPLEMENTED, "worker sessions use the WebSocket protocol at /ws/worker (docs/protocol.md)"
        )
        yield  # an async generator, as a bidirectional stream's handler is


class Access:
    """Interceptor, before the body is read: bearer tokens and their scopes, and read-only mode for AdminService."""

    async def on_start(self, ctx: RequestContext) -> None:
        service = ctx.method.service_name
        if service == "conveyor.v1.WebhookService":
            return  # the delivery's lease token is the credential (checked by the handler)
        if auth_required():
            try:
                require_scope(request_token(ctx), *needed_scopes(service, ctx.method.name))
            except ConveyorError as exc:
                raise connect_error(exc) from None
        if service == "conveyor.v1.AdminService" and ctx.method.name not in READS and conveyor_settings.READ_ONLY:
            raise ConnectError(Code.PERMISSION_DENIED, "the server is in read-only mode")

    async def on_end(self, token: None, ctx: RequestContext, error: Exception | None) -> None:
        return None


def services() -> dict[str, ASGIApp]:
    """One ASGI application per service, by its path prefix (``/conveyor.v1.TaskService``)."""
    options: dict[str, Any] = {
        "interceptors": [Access(), ConveyorErrors()],
        "read_max_bytes": READ_MAX_BYTES,
        # proto3 JSON, refusing unknown fields as its spec's parsers do by
        # default: a misspelt option must not pass silently as a default.
        "codecs": [google_protobuf_binary_codec(), ProtoJSON()],
    }
    apps = [
        rpc.TaskServiceASGIApplication(Service(TASK_SERVICE, queue_limited=True), **options),
        rpc.AdminServiceASGIApplication(Service(ADMIN_SERVICE, watch_events=watch_events), **options),
        rpc.WebhookServiceASGIApplication(Service(WEBHOOK_SERVICE), **options),
        rpc.WorkerServiceASGIApplication(WorkerSessions(), **options),
    ]
    return {app.path: app for app in apps}


class ConnectMount:
    def __init__(self, app: ASGIApp, prefix: str = "/") -> None:
        self.app = app
        self.root = prefix.rstrip("/")  # where conveyor.urls is: the services' root path
        self.start = self.root + PREFIX
        self._services: dict[str, ASGIApp] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(self.start):
            await self.app(scope, receive, send)
            return
        if self._services is None:
            self._services = services()  # at the first call: settings and apps are ready by then
        service = path[len(self.root) :].partition("/")[2].partition("/")[0]
        target = self._services.get(f"/{service}")
        refusal = connect_refusal(scope) or header_refusal(scope)
        if target is None:
            await respond(send, 404)
        elif refusal is not None:
            await respond_error(send, refusal)
        elif grpc_without_trailers(scope):
            await respond(send, 415, [ACCEPT_POST])
        else:
            # The runtime strips the root path from the path to find the method.
            scope = without_bad_authorization(scope)
            await target(dict(scope, root_path=scope.get("root_path", "") + self.root), receive, send)


def connect_refusal(scope: dict[str, Any]) -> Refusal | None:
    """Another site's page (conveyor.api.origin), or a body with no Connect content type."""
    refusal = scope_refusal(scope, accepted=CODECS)
    if refusal is not None:
        return refusal
    content_type = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin1")
    if scope.get("method") == "POST" and not media_type(content_type):
        # What a page's fetch() of an untyped body sends; the runtime would
        # refuse it too, with no body saying why.
        return Refusal(415, f"a Connect request needs a Content-Type: {CODECS}")
    return None


def header_refusal(scope: dict[str, Any]) -> Refusal | None:
    """A header that is not UTF-8, which the Connect runtime cannot read (it would fail with a 500).

    A wrong ``Authorization`` is unauthenticated like any wrong token (and
    ignored, as tokens are, on a node without any); another header is the
    client's mistake.
    """
    for name, value in scope.get("headers") or []:
        if not _utf8(value):
            label = name.decode("latin1").lower()
            if label == "authorization":
                return Refusal(401, "a valid bearer token is required") if auth_required() else None
            return Refusal(400, f"the {label} header is not UTF-8")
    return None


def without_bad_authorization(scope: dict[str, Any]) -> dict[str, Any]:
    """*scope* without an ``Authorization`` header that is not UTF-8 (auth off: it is ignored)."""
    headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"authorization" or _utf8(v)]
    return dict(scope, headers=headers)


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


STATUS_CODES = {401: Code.UNAUTHENTICATED, 403: Code.PERMISSION_DENIED}


async def respond_error(send: Any, refusal: Refusal) -> None:
    """A Connect error body; a refused content type also gets the Accept-Post the protocol asks for."""
    code = STATUS_CODES.get(refusal.status, Code.INVALID_ARGUMENT)
    body = json.dumps({"code": code.value, "message": refusal.message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="conveyor"'))
    if refusal.status == 415:
        headers.append(ACCEPT_POST)
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def grpc_without_trailers(scope: dict[str, Any]) -> bool:
    headers = dict(scope.get("headers") or [])
    content_type = headers.get(b"content-type", b"").decode("latin1").lower()
    grpc = content_type == GRPC_TYPES[0] or content_type.startswith(GRPC_TYPES[1])
    return grpc and "http.response.trailers" not in (scope.get("extensions") or {})


async def respond(send: Any, status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or []})
    await send({"type": "http.response.body", "body": b""})


def mount(app: ASGIApp, prefix: str = "/") -> ASGIApp:
    """Serve the ``conveyor.v1`` Connect services under *prefix* in front of *app* (Django's ASGI application)."""
    return ConnectMount(app, prefix)
