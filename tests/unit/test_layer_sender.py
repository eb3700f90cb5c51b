"""The channel-layer sender of non-node processes, against a real Redis."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions
from channels.layers import BaseChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

from conveyor.dispatch.signals import LayerSender
from conveyor_site.layers import redis_channel_layer
from tests.conftest import require_services
from tests.services import redis_problem

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def layer() -> BaseChannelLayer:
    problem = redis_problem(REDIS_URL)
    if problem:
        if require_services():
            pytest.fail(problem)
        pytest.skip(problem)
    config = redis_channel_layer(REDIS_URL, f"test{uuid.uuid4().hex[:8]}")["CONFIG"]
    return RedisPubSubChannelLayer(**config)


async def _join_and_receive(layer: BaseChannelLayer, group: str, count: int, ready: asyncio.Event) -> list[dict]:
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    ready.set()
    return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]


def _received(layer: BaseChannelLayer, count: int, produce: Callable[[], Awaitable[None]]) -> list[int]:
    """Join group "g", run *produce*, return the ``n`` of the first *count* messages."""

    async def scenario() -> list[dict]:
        ready = asyncio.Event()
        receiving = asyncio.create_task(_join_and_receive(layer, "g", count, ready))
        await ready.wait()
        await produce()
        return await receiving

    return [m["n"] for m in asyncio.run(scenario())]


async def _in_thread(fn: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def test_messages_arrive_in_the_order_sent_whether_waited_for_or_not(layer: BaseChannelLayer) -> None:
    sender = LayerSender()

    def send_all() -> None:
        for i in range(20):
            sender.send(layer, "g", {"type": "t", "n": i}, wait=i % 3 == 0)
        sender.flush()

    assert _received(layer, 20, lambda: _in_thread(send_all)) == list(range(20))


def test_one_loop_and_one_connection_serve_every_message(layer: BaseChannelLayer) -> None:
    sender = LayerSender()
    for i in range(5):
        sender.send(layer, "nobody", {"type": "t", "n": i}, wait=True)
    first_loop = sender._loop
    sender.send(layer, "nobody", {"type": "t"}, wait=True)
    assert sender._loop is first_loop
    # channels_redis keeps one connection pool per event loop it was used from.
    assert list(layer._layers) == [first_loop]


def test_a_wake_that_redis_refuses_raises_to_the_caller() -> None:
    sender = LayerSender()
    dead = RedisPubSubChannelLayer(**redis_channel_layer("redis://127.0.0.1:1/0", "dead")["CONFIG"])
    with pytest.raises(redis.exceptions.ConnectionError):
        sender.send(dead, "g", {"type": "t"}, wait=True)


def test_flush_waits_until_messages_sent_without_waiting_have_gone_out(layer: BaseChannelLayer) -> None:
    sender = LayerSender()
    flushed: list[bool] = []

    def send_all() -> None:
        for i in range(50):
            sender.send(layer, "g", {"type": "t", "n": i}, wait=False)
        sender.flush(timeout=5)
        flushed.append(not sender._pending)

    assert _received(layer, 50, lambda: _in_thread(send_all)) == list(range(50))
    assert flushed == [True]


EXITING_PRODUCER = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "conveyor_site.settings"
os.environ.pop("REDIS_URL", None)
import django
django.setup()
from channels_redis.pubsub import RedisPubSubChannelLayer
from conveyor.dispatch.signals import LayerSender
from conveyor_site.layers import redis_channel_layer
layer = RedisPubSubChannelLayer(**redis_channel_layer(sys.argv[1], sys.argv[2])["CONFIG"])
sender = LayerSender()
for i in range(20):
    sender.send(layer, "g", {"type": "t", "n": i}, wait=False)
# exits at once: only the exit flush can deliver these
"""


def test_events_queued_just_before_the_process_exits_are_delivered(layer: BaseChannelLayer) -> None:
    # By host name, as most deployments name Redis: resolving it at exit
    # needs a thread pool the interpreter may already have shut down.
    url = REDIS_URL.replace("127.0.0.1", "localhost")
    prefix = layer._kwargs["prefix"]

    async def exiting_producer() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", EXITING_PRODUCER, url, prefix, cwd=ROOT, stderr=asyncio.subprocess.PIPE
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()

    assert _received(layer, 20, exiting_producer) == list(range(20))
