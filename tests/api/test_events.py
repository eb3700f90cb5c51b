"""Live events: REST changes reach /ws/events and the SSE stream, filtered by queue, type and kind.

The producer side is the real one a process without a node uses: the broker
publishes after commit through the shared (Redis) channel layer, and the
consumers listen on it. (A node's own event batching is covered by
``test_live_node.py``.)
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, override_settings

from conveyor_site.asgi import application
from conveyor_site.layers import redis_channel_layer
from tests.api.conftest import Api, ok
from tests.services import redis_problem

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WAIT = 10.0


@pytest.fixture(autouse=True)
def redis_layer():
    problem = redis_problem(REDIS_URL)
    if problem:
        pytest.skip(f"Redis tests skipped: {problem}")
    layers = {"default": redis_channel_layer(REDIS_URL, f"api{uuid.uuid4().hex[:8]}")}
    with override_settings(CHANNEL_LAYERS=layers):
        from channels.layers import channel_layers

        channel_layers.backends.clear()  # build the layer from these settings
        yield
        channel_layers.backends.clear()


async def post(path: str, body: Any, status: int = 201) -> dict[str, Any]:
    return await sync_to_async(lambda: ok(Api().post(path, body), status))()


async def enqueue_mix() -> dict[str, str]:
    """One task per combination; return {label: task id}."""
    ids = {}
    for label, body in {
        "match": {"type": "send", "queue": "mail"},
        "other-queue": {"type": "send", "queue": "sms"},
        "other-type": {"type": "bounce", "queue": "mail"},
    }.items():
        ids[label] = (await post("/api/v1/tasks", body))["id"]
    return ids


async def ws_events(query: str, act: Any, want: int) -> tuple[list[dict[str, Any]], Any]:
    """Open /ws/events?query, run *act*, collect events until *want* arrived and the socket is quiet."""
    communicator = WebsocketCommunicator(application, f"/ws/events?{query}")
    connected, _ = await communicator.connect()
    assert connected
    try:
        acted = await act()
        events: list[dict[str, Any]] = []
        while len(events) < want:
            events += json.loads(await communicator.receive_from(timeout=WAIT))["events"]
        assert await communicator.receive_nothing(timeout=0.5)
        return events, acted
    finally:
        await communicator.disconnect()


def test_websocket_events_arrive_filtered_by_queue_and_type():
    events, ids = async_to_sync(ws_events)("queue=mail&type=send", enqueue_mix, 1)
    assert [(e["kind"], e["task_id"], e["queue"], e["type"], e["state"]) for e in events] == [
        ("enqueued", ids["match"], "mail", "send", "pending")
    ]


def test_websocket_events_filter_by_kind_and_several_queues():
    async def act() -> dict[str, str]:
        ids = await enqueue_mix()
        await post(f"/api/v1/tasks/{ids['other-queue']}/cancel", None, 200)
        await post(f"/api/v1/tasks/{ids['match']}/cancel", None, 200)
        return ids

    events, ids = async_to_sync(ws_events)("queue=mail,sms&kind=canceled", act, 2)
    assert [(e["kind"], e["task_id"]) for e in events] == [("canceled", ids["other-queue"]), ("canceled", ids["match"])]
    assert {e["state"] for e in events} == {"canceled"}


def test_sse_stream_carries_the_same_events_filtered():
    async def run() -> tuple[list[str], dict[str, str]]:
        response = await AsyncClient().get("/api/v1/events?queue=mail&type=send")
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
        stream = aiter(response.streaming_content)
        chunks = [await anext(stream)]
        assert chunks[0] == b": connected\n\n"
        ids = await enqueue_mix()
        try:
            while not any(ids["match"].encode() in c for c in chunks):
                chunks.append(await asyncio.wait_for(anext(stream), WAIT))
            # Nothing else comes (the stream's keepalive is 15s away).
            with pytest.raises(TimeoutError):
                chunks.append(await asyncio.wait_for(anext(stream), 0.5))
        finally:
            await stream.aclose()
        return [c.decode() for c in chunks[1:]], ids

    messages, ids = async_to_sync(run)()
    assert len(messages) == 1
    lines = messages[0].strip().split("\n")
    assert lines[0] == "event: enqueued"
    event = json.loads(lines[1].removeprefix("data: "))
    assert (event["task_id"], event["queue"], event["type"]) == (ids["match"], "mail", "send")


def test_sse_events_published_while_the_stream_sits_at_a_keepalive_are_not_lost(monkeypatch):
    import conveyor.api.events
    from conveyor.api.events import EventFilter, _stream

    monkeypatch.setattr(conveyor.api.events, "KEEPALIVE", 0.05)

    async def run() -> tuple[str, dict[str, str]]:
        # The generator itself, so that it stays paused after a keepalive
        # (an ASGI server may take a while to ask for the next chunk).
        stream = _stream(EventFilter.from_query({"queue": ["mail"], "type": ["send"]}))
        try:
            assert await anext(stream) == ": connected\n\n"
            assert await asyncio.wait_for(anext(stream), WAIT) == ": keepalive\n\n"
            ids = await enqueue_mix()  # published while the stream is paused
            await asyncio.sleep(0.3)  # ... and delivered to this process meanwhile
            return await asyncio.wait_for(anext(stream), WAIT), ids
        finally:
            await stream.aclose()

    chunk, ids = async_to_sync(run)()
    assert chunk.startswith("event: enqueued\n") and ids["match"] in chunk
