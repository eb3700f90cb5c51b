"""Live lifecycle events: a WebSocket (/ws/events) and server-sent events (/api/v1/events).

Events are published by nodes after commit, in batches, to the channel-layer
group ``conveyor.events``; every subscriber filters by queue and type.
Best effort: a slow or disconnected subscriber misses events, nothing else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse

from conveyor.exceptions import ConveyorError, PermissionDenied, Unauthenticated
from conveyor.notify.groups import EVENTS_GROUP
from conveyor.permissions import missing_permission
from conveyor.tokens import READ, auth_required, authenticate, bearer_from_header, require_scope

KEEPALIVE = 15.0
CLOSE_CODES = {"unauthenticated": 4401, "permission_denied": 4403}  # as on /ws/worker


class EventFilter:
    """Keep events of these queues, task types and event kinds (an empty set keeps all)."""

    def __init__(self, queues: list[str], types: list[str], kinds: list[str] | tuple[str, ...] = ()) -> None:
        self.queues = set(queues)
        self.types = set(types)
        self.kinds = set(kinds)

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> EventFilter:
        def values(key: str) -> list[str]:
            return [v for raw in query.get(key, []) for v in raw.split(",") if v]

        return cls(values("queue"), values("type"), values("kind"))

    def select(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            e
            for e in events
            if (not self.queues or e["queue"] in self.queues)
            and (not self.types or e["type"] in self.types)
            and (not self.kinds or e["kind"] in self.kinds)
        ]


def _staff(user: Any) -> bool:
    """A staff session that may see tasks (``conveyor.view_task``): events name tasks' types and ids."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_staff", False):
        return False
    return missing_permission(user, "view", "task") is None


class EventsConsumer(AsyncWebsocketConsumer):
    """``/ws/events?queue=a,b&type=x&kind=completed``: batches of events as ``{"events": [...]}``."""

    async def connect(self) -> None:
        self.joined = False
        try:
            await self._check_access()
        except ConveyorError as exc:
            # Accept first: a close before the handshake completes reaches the
            # client as a bare HTTP 403, and the 4401 (and why) would be lost.
            await self.accept()
            await self.send(text_data=json.dumps({"error": exc.code, "message": exc.message}))
            await self.close(code=CLOSE_CODES[exc.code])
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.filter = EventFilter.from_query(query)
        await self.channel_layer.group_add(EVENTS_GROUP, self.channel_name)
        self.joined = True
        await self.accept()

    async def _check_access(self) -> None:
        """A token with the read scope, or a staff session (when auth is on)."""
        if not auth_required():
            return
        header = next((v.decode("latin1") for k, v in self.scope.get("headers", []) if k == b"authorization"), "")
        user = self.scope.get("user")
        if bearer_from_header(header) is None and user is not None and await database_sync_to_async(_staff)(user):
            return
        require_scope(authenticate(header), READ)

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(EVENTS_GROUP, self.channel_name)

    async def conveyor_events(self, message: dict[str, Any]) -> None:
        events = self.filter.select(message["events"])
        if events:
            await self.send(text_data=json.dumps({"events": events}))


async def events_stream(request: HttpRequest) -> StreamingHttpResponse | JsonResponse:
    """``GET /api/v1/events?queue=&type=&kind=``: the same events as server-sent events."""
    try:
        await _check_request(request)
    except Unauthenticated as exc:
        response = JsonResponse({"error": exc.code, "message": exc.message}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="conveyor"'
        return response
    except PermissionDenied as exc:
        return JsonResponse({"error": exc.code, "message": exc.message, **exc.details}, status=403)
    event_filter = EventFilter.from_query({k: request.GET.getlist(k) for k in request.GET})
    response = StreamingHttpResponse(_stream(event_filter), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _check_request(request: HttpRequest) -> None:
    if not auth_required():
        return
    header = request.headers.get("Authorization", "")
    # The permission lookup reads the database.
    if bearer_from_header(header) is None and await database_sync_to_async(_staff)(await request.auser()):
        return
    require_scope(authenticate(header), READ)


async def subscribe(event_filter: EventFilter, keepalive: float = KEEPALIVE) -> AsyncIterator[list[dict[str, Any]]]:
    """This node's share of the events group: an empty batch once subscribed,
    then each batch that passes *event_filter*, and an empty batch after
    *keepalive* seconds without one."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(EVENTS_GROUP, channel)
    # One receive stays pending across keepalives: canceling it (wait_for)
    # would make the pub/sub layer drop the channel and what arrives meanwhile.
    receiving: asyncio.Task[Any] | None = None
    try:
        yield []
        while True:
            receiving = receiving or asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait({receiving}, timeout=keepalive)
            if not done:
                yield []
                continue
            message, receiving = receiving.result(), None
            events = event_filter.select(message.get("events", []))
            if events:
                yield events
    finally:
        if receiving is not None:
            receiving.cancel()
        await layer.group_discard(EVENTS_GROUP, channel)


async def _stream(event_filter: EventFilter) -> AsyncIterator[str]:
    said = ": connected\n\n"
    async for events in subscribe(event_filter, KEEPALIVE):
        if not events:
            yield said
            said = ": keepalive\n\n"
        for event in events:
            yield f"event: {event['kind']}\ndata: {json.dumps(event)}\n\n"
