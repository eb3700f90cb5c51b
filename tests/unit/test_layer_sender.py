"""The channel-layer sender of non-node processes, against a real Redis."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions
from channels.layers import BaseChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.test import override_settings

from conveyor.notify import layer as signals
from conveyor.notify.groups import EVENTS_GROUP, queue_group
from conveyor.notify.layer import ChannelLayerHooks, DirectPublisher, LayerSender, direct_publisher
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


def _events_received(layer: BaseChannelLayer, produce: Callable[[], Awaitable[None]], quiet: float = 0.5) -> list[dict]:
    """Join the events group, run *produce*, return every message until *quiet* s pass without one."""

    async def scenario() -> list[dict]:
        channel = await layer.new_channel()
        await layer.group_add(EVENTS_GROUP, channel)
        await produce()
        messages = [await asyncio.wait_for(layer.receive(channel), 5)]
        while True:
            try:
                messages.append(await asyncio.wait_for(layer.receive(channel), quiet))
            except TimeoutError:
                return messages

    return asyncio.run(scenario())


def _events_n(messages: list[dict]) -> list[int]:
    """The ``n`` of every event, in the order received."""
    return [e["n"] for m in messages for e in m["events"]]


PRODUCER_PREAMBLE = """
import os, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # (a fork of a process with threads, on purpose)
os.environ["DJANGO_SETTINGS_MODULE"] = "conveyor_site.settings"
os.environ.pop("REDIS_URL", None)
import django
django.setup()
from channels_redis.pubsub import RedisPubSubChannelLayer
from conveyor.notify.layer import LayerSender
from conveyor_site.layers import redis_channel_layer
layer = RedisPubSubChannelLayer(**redis_channel_layer(sys.argv[1], sys.argv[2])["CONFIG"])
sender = LayerSender()
"""


def _producer(script: str, url: str, prefix: str) -> Callable[[], Awaitable[None]]:
    """A producer process running *script* after ``PRODUCER_PREAMBLE``; it must exit 0."""

    async def run() -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PRODUCER_PREAMBLE + script, url, prefix, cwd=ROOT, stderr=asyncio.subprocess.PIPE
        )
        _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()

    return run


def test_messages_arrive_in_the_order_sent(layer: BaseChannelLayer) -> None:
    sender = LayerSender()

    def send_all() -> None:
        for i in range(20):
            sender.send(layer, "g", {"type": "t", "n": i})

    assert _received(layer, 20, lambda: _in_thread(send_all)) == list(range(20))


def test_one_loop_and_one_connection_serve_every_message(layer: BaseChannelLayer) -> None:
    sender = LayerSender()
    for i in range(5):
        sender.send(layer, "nobody", {"type": "t", "n": i})
    first_loop = sender._loop
    sender.send(layer, "nobody", {"type": "t"})
    assert sender._loop is first_loop
    # channels_redis keeps one connection pool per event loop it was used from.
    assert list(layer._layers) == [first_loop]


def test_a_wake_that_redis_refuses_raises_to_the_caller() -> None:
    sender = LayerSender()
    dead = RedisPubSubChannelLayer(**redis_channel_layer("redis://127.0.0.1:1/0", "dead")["CONFIG"])
    with pytest.raises(redis.exceptions.ConnectionError):
        sender.send(dead, "g", {"type": "t"})


def test_flush_waits_until_events_sent_without_waiting_have_gone_out(layer: BaseChannelLayer) -> None:
    sender = LayerSender()
    flushed: list[bool] = []

    def send_all() -> None:
        for i in range(50):
            sender.send_events(layer, [{"n": i}])
        sender.flush(timeout=5)
        flushed.append(all(done.done() for done in list(sender._pending)))

    assert _events_n(_events_received(layer, lambda: _in_thread(send_all))) == list(range(50))
    assert flushed == [True]


EXITING_PRODUCER = """
for i in range(20):
    sender.send_events(layer, [{"n": i}])
# exits at once: only the exit flush can deliver these
"""


def test_events_queued_just_before_the_process_exits_are_delivered(layer: BaseChannelLayer) -> None:
    # By host name, as most deployments name Redis: resolving it at exit
    # needs a thread pool the interpreter may already have shut down.
    url = REDIS_URL.replace("127.0.0.1", "localhost")
    exiting_producer = _producer(EXITING_PRODUCER, url, layer._kwargs["prefix"])
    assert _events_n(_events_received(layer, exiting_producer)) == list(range(20))


# -- wakes published straight from the caller's thread -------------------------------


@pytest.fixture
def fresh_sender(monkeypatch: pytest.MonkeyPatch) -> LayerSender:
    """The process's sender, replaced by one that has not started its thread."""
    fresh = LayerSender()
    monkeypatch.setattr(signals, "sender", fresh)
    return fresh


@pytest.fixture
def publisher(layer: BaseChannelLayer) -> Iterator[DirectPublisher]:
    """A direct publisher of its own for the test's layer (not the process's)."""
    made = DirectPublisher.for_layer(layer)
    assert made is not None
    yield made
    made.close()


def test_a_direct_publish_reaches_a_group_member_of_the_layer(
    layer: BaseChannelLayer, publisher: DirectPublisher
) -> None:

    async def publish() -> None:
        for i in range(3):
            publisher.publish("g", {"type": "t", "n": i})

    assert _received(layer, 3, publish) == [0, 1, 2]


def test_wakes_from_django_code_leave_without_the_sender_thread(
    layer: BaseChannelLayer, fresh_sender: LayerSender
) -> None:
    prefix = layer._kwargs["prefix"]
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(REDIS_URL, prefix)}):
        hooks = ChannelLayerHooks()  # finds the layer as enqueue does: get_channel_layer()

        async def wake() -> None:
            hooks.wake(["g"])

        async def scenario() -> list[dict]:
            ready = asyncio.Event()
            receiving = asyncio.create_task(_join_and_receive(layer, queue_group("g"), 1, ready))
            await ready.wait()
            await wake()
            return await receiving

        messages = asyncio.run(scenario())
    assert messages[0]["type"] == "conveyor.wake" and messages[0]["queue"] == "g"
    assert fresh_sender._loop is None  # no event loop thread was started for it


def test_a_wake_redis_refuses_is_logged_not_raised(caplog: pytest.LogCaptureFixture, fresh_sender: LayerSender) -> None:
    hooks = ChannelLayerHooks()
    dead = RedisPubSubChannelLayer(**redis_channel_layer("redis://127.0.0.1:1/0", "dead")["CONFIG"])
    hooks._layer = dead
    hooks._direct = direct_publisher(dead)
    assert hooks._direct is not None
    hooks.wake(["default"])  # best effort: the enqueue that asked for it has committed
    assert "could not reach the channel layer" in caplog.text
    assert fresh_sender._loop is None


@pytest.fixture
def no_publish_user() -> Iterator[str]:
    """A Redis user that may do anything but PUBLISH; yields its name (password "p")."""
    admin = redis.Redis.from_url(REDIS_URL)
    name = f"conveyor_test_{uuid.uuid4().hex[:8]}"
    admin.execute_command("ACL", "SETUSER", name, "on", ">p", "~*", "&*", "+@all", "-publish")
    yield name
    admin.execute_command("ACL", "DELUSER", name)


def test_a_message_redis_refuses_is_logged_and_the_line_goes_on(
    no_publish_user: str, caplog: pytest.LogCaptureFixture
) -> None:
    host = {"address": REDIS_URL, "username": no_publish_user, "password": "p"}
    layer = RedisPubSubChannelLayer(hosts=[host], prefix="x")  # (the publisher holds it weakly)
    publisher = DirectPublisher.for_layer(layer)
    assert publisher is not None
    try:
        for n in range(3):
            publisher.publish("g", {"type": "t", "n": n})  # each refused; none raises
        assert publisher._line.settle(5)  # every reply (an error) came in and was counted
        connection = publisher._line.conn
        publisher.publish("g", {"type": "t", "n": 3})
        assert publisher._line.conn is connection and connection.is_connected  # the same connection
    finally:
        publisher.close()
    refused = [r for r in caplog.records if "Redis refused a message published earlier" in r.getMessage()]
    assert len(refused) >= 3 and "NOPERM" in refused[0].getMessage()


def test_the_process_keeps_one_publisher_per_layer(layer: BaseChannelLayer) -> None:
    first = direct_publisher(layer)
    assert first is not None
    assert direct_publisher(layer) is first


def test_credentials_and_a_shorter_connect_timeout_are_passed_on() -> None:
    host = {"address": "redis://127.0.0.1:6379/0", "username": "u", "password": "p", "socket_connect_timeout": 30}
    publisher = DirectPublisher.for_layer(RedisPubSubChannelLayer(hosts=[host], prefix="x"))
    assert publisher is not None
    options = publisher.redis.connection_pool.connection_kwargs
    assert (options["username"], options["password"]) == ("u", "p")
    assert options["socket_connect_timeout"] == options["socket_timeout"] == signals.SEND_TIMEOUT


@pytest.mark.parametrize(
    "hosts",
    [
        [{"address": "redis://127.0.0.1:6379/0"}, {"address": "redis://127.0.0.1:6380/0"}],  # sharded
        [("127.0.0.1", 6379)],  # not a URL
        [{"master_name": "m", "sentinels": [("127.0.0.1", 26379)]}],  # Sentinel
        [{"address": "redis://127.0.0.1:6379/0", "ssl_cert_reqs": None}],  # an option it would not honour
        [{"address": "redis://127.0.0.1:6379/0?socket_timeout=30"}],  # options in the URL win over its own
    ],
)
def test_layers_it_cannot_publish_for_exactly_are_left_to_the_sender(hosts: list[Any]) -> None:
    assert DirectPublisher.for_layer(RedisPubSubChannelLayer(hosts=hosts, prefix="x")) is None


def test_a_url_redis_py_refuses_leaves_wakes_to_the_layer_and_enqueue_unharmed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = RedisPubSubChannelLayer(hosts=[{"address": "redis://127.0.0.1:notaport/0"}], prefix="x")
    assert DirectPublisher.for_layer(bad) is None
    assert "wakes go through the layer" in caplog.text


def test_the_list_based_redis_layer_is_left_to_the_sender() -> None:
    from channels_redis.core import RedisChannelLayer

    assert DirectPublisher.for_layer(RedisChannelLayer(hosts=[{"address": "redis://127.0.0.1:6379/0"}])) is None


# -- events from processes that are not a node ---------------------------------------


def test_events_sent_close_together_go_out_as_one_message_in_order(layer: BaseChannelLayer) -> None:
    sender = LayerSender()

    def send_all() -> None:
        for i in range(30):
            sender.send_events(layer, [{"n": i}])

    messages = _events_received(layer, lambda: _in_thread(send_all))
    # 30 sends within far less than EVENT_FLUSH_DELAY: one message (two if
    # this machine stalled the loop past the delay), nothing lost or reordered.
    assert 1 <= len(messages) <= 2
    assert _events_n(messages) == list(range(30))
    assert all(m["type"] == "conveyor.events" for m in messages)


def test_flush_sends_gathered_events_without_waiting_for_the_delay(
    layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals, "EVENT_FLUSH_DELAY", 30.0)  # only a flush can send them in time
    sender = LayerSender()
    flushed: list[bool] = []

    def send_and_flush() -> None:
        sender.send_events(layer, [{"n": 1}, {"n": 2}])
        sender.flush(timeout=5)
        flushed.append(all(done.done() for done in list(sender._pending)))

    messages = _events_received(layer, lambda: _in_thread(send_and_flush))
    assert _events_n(messages) == [1, 2]
    assert flushed == [True]


def test_a_full_backlog_drops_events_and_counts_them(layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signals, "BACKLOG_MAX", 5)
    monkeypatch.setattr(signals, "EVENT_BATCH_MAX", 2)
    monkeypatch.setattr(signals, "EVENT_FLUSH_DELAY", 30.0)  # nothing settles during the test
    sender = LayerSender()
    monkeypatch.setattr(sender, "_queue_batch", lambda batch: None)  # nor goes out: Redis "hangs"
    try:
        sender.send_events(layer, [{"n": 0}, {"n": 1}])
        sender.send_events(layer, [{"n": 2}])  # a second message: the first is full
        sender.send_events(layer, [{"n": 3}, {"n": 4}])  # a third: 5 events held, the limit
        assert sender.dropped == 0 and sender._backlog == 5 and len(sender._pending) == 3
        sender.send_events(layer, [{"n": 5}])  # the limit counts events, not messages
        assert sender.dropped == 1 and sender._backlog == 5
    finally:
        for done in list(sender._pending):
            done.cancel()  # settles them: nothing is left for the exit flush to wait for
    assert sender._backlog == 0 and not sender._pending


def test_full_messages_go_out_at_once_and_in_order(layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signals, "EVENT_BATCH_MAX", 2)
    monkeypatch.setattr(signals, "EVENT_FLUSH_DELAY", 30.0)  # only a full message or a flush sends
    sender = LayerSender()

    def send_all() -> None:
        for i in range(5):
            sender.send_events(layer, [{"n": i}])
        sender.flush(timeout=5)

    messages = _events_received(layer, lambda: _in_thread(send_all))
    assert [[e["n"] for e in m["events"]] for m in messages] == [[0, 1], [2, 3], [4]]


def test_events_0_stops_publishing_from_django_code_too(layer: BaseChannelLayer) -> None:
    hooks = ChannelLayerHooks()
    hooks._layer = layer
    assert hooks.wants_events
    with override_settings(CONVEYOR={"EVENTS": False}):
        assert not hooks.wants_events


def test_one_call_with_more_events_than_a_message_holds_is_split_and_partly_accepted(
    layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals, "EVENT_BATCH_MAX", 2)
    monkeypatch.setattr(signals, "BACKLOG_MAX", 4)
    monkeypatch.setattr(signals, "EVENT_FLUSH_DELAY", 30.0)
    sender = LayerSender()

    def send_and_flush() -> None:
        sender.send_events(layer, [{"n": i} for i in range(5)])  # room for 4: the fifth is dropped
        sender.flush(timeout=5)

    messages = _events_received(layer, lambda: _in_thread(send_and_flush))
    assert [[e["n"] for e in m["events"]] for m in messages] == [[0, 1], [2, 3]]
    assert sender.dropped == 1


def test_threads_sending_first_at_the_same_moment_start_one_loop(layer: BaseChannelLayer) -> None:
    import threading

    sender = LayerSender()
    barrier = threading.Barrier(8)
    loops = []

    def first_send() -> None:
        barrier.wait()
        loops.append(sender._start())

    threads = [threading.Thread(target=first_send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(loop) for loop in loops}) == 1


def test_events_that_cannot_be_handed_on_are_logged_not_raised(
    layer: BaseChannelLayer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*args: Any) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(signals.sender, "send_events", refuse)
    hooks = ChannelLayerHooks()
    hooks._layer = layer
    hooks.publish([])  # the change they describe has committed: never raise to the caller
    assert "could not hand events to the channel layer" in caplog.text


FORKING_PRODUCER = """
sender.send_events(layer, [{"n": 0}])
sender.flush(timeout=5)  # the parent's loop thread is running: the child gets none of it
pid = os.fork()
if pid == 0:
    sender.send_events(layer, [{"n": 1}])
    sender.flush(timeout=5)
    os._exit(0)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_starts_its_own_sender_and_its_events_arrive(layer: BaseChannelLayer) -> None:
    forking_producer = _producer(FORKING_PRODUCER, REDIS_URL, layer._kwargs["prefix"])
    assert _events_n(_events_received(layer, forking_producer)) == [0, 1]


def test_django_codes_hooks_reach_other_processes_only_through_redis(layer: BaseChannelLayer) -> None:
    prefix = layer._kwargs["prefix"]
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(REDIS_URL, prefix)}):
        assert ChannelLayerHooks().reaches_other_processes  # so an enqueue looks for offers
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        assert not ChannelLayerHooks().reaches_other_processes  # nobody to reach: a plain INSERT


def test_direct_publishes_do_not_wait_for_replies_yet_every_one_arrives_in_order(
    layer: BaseChannelLayer, publisher: DirectPublisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = signals._Line.OWED
    owed: list[int] = []

    async def publish() -> None:
        publisher.publish("g", {"type": "t", "n": 0})
        # As if no reply had come in yet whenever the next message goes out:
        # only the limit makes the publisher read one.
        monkeypatch.setattr(publisher._line, "_in", lambda conn: None)
        for i in range(1, limit * 3):
            publisher.publish("g", {"type": "t", "n": i})
            owed.append(publisher._line.owed)

    assert _received(layer, limit * 3, publish) == list(range(limit * 3))
    assert owed[: limit - 1] == list(range(2, limit + 1))  # nothing waited for until the limit
    # Then what has come in is read whenever the limit is reached: never more unread.
    assert max(owed[limit - 1 :]) == limit and min(owed[limit - 1 :]) < limit


def _published(publisher: DirectPublisher, n: int) -> None:
    """Publish *n* and wait until Redis has answered it (so it has gone to the subscribers)."""
    publisher.publish("g", {"type": "t", "n": n})
    assert publisher._line.settle(5)


def _kill(publisher: DirectPublisher, killer: redis.Redis) -> None:
    host, port = publisher._line.conn._sock.getsockname()[:2]
    assert killer.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")


def test_a_direct_publisher_whose_connection_was_killed_reconnects_and_delivers(
    layer: BaseChannelLayer, publisher: DirectPublisher, caplog: pytest.LogCaptureFixture
) -> None:
    killer = redis.Redis.from_url(REDIS_URL)

    async def publish() -> None:
        _published(publisher, 0)
        _kill(publisher, killer)
        await asyncio.sleep(0.05)  # the close has reached this side
        publisher.publish("g", {"type": "t", "n": 1})

    assert _received(layer, 2, publish) == [0, 1]
    assert "reconnecting" in caplog.text


def test_a_close_behind_an_unread_reply_is_noticed_before_the_next_write(
    layer: BaseChannelLayer, publisher: DirectPublisher, caplog: pytest.LogCaptureFixture
) -> None:
    # The last reply is still unread when Redis closes the connection: the
    # socket holds the reply, then the close. Both must be read before writing.
    killer = redis.Redis.from_url(REDIS_URL)

    async def publish() -> None:
        publisher.publish("g", {"type": "t", "n": 0})
        sock = publisher._line.conn._sock
        signals._wait_for(sock, signals._READABLE, time.monotonic() + 5)  # its reply is in, unread
        assert publisher._line.owed == 1
        _kill(publisher, killer)
        closed = select.poll()
        closed.register(sock, select.POLLRDHUP)
        assert closed.poll(5000)  # the close has reached this side, behind the reply
        publisher.publish("g", {"type": "t", "n": 1})

    assert _received(layer, 2, publish) == [0, 1]
    assert "reconnecting" in caplog.text


def test_the_publishing_connection_speaks_resp2_with_nothing_pushed(publisher: DirectPublisher) -> None:
    publisher.publish("g", {"type": "t"})
    connection = publisher._line.conn
    assert connection.protocol in (2, "2")  # (redis-py's default is RESP3)
    config = getattr(connection, "maint_notifications_config", None)
    assert config is None or not config.enabled


def test_reconnecting_more_often_than_the_pool_allows_connections_keeps_publishing(
    layer: BaseChannelLayer, publisher: DirectPublisher
) -> None:
    killer = redis.Redis.from_url(REDIS_URL)
    limit = publisher.redis.connection_pool.max_connections  # what a pool makes at most (100 in redis-py 8)
    assert limit <= 1000
    kills = limit + 5

    async def publish() -> None:
        for n in range(kills):
            _published(publisher, n)
            _kill(publisher, killer)
            await asyncio.sleep(0.005)
        publisher.publish("g", {"type": "t", "n": kills})

    assert _received(layer, kills + 1, publish) == list(range(kills + 1))


def test_a_child_forked_while_a_publish_held_the_line_publishes_on_a_connection_of_its_own(
    layer: BaseChannelLayer,
    publisher: DirectPublisher,
) -> None:

    async def publish() -> None:
        _published(publisher, 0)
        parent_connection = publisher._line.conn
        publisher._line.lock.acquire()  # as if another thread were publishing at the fork
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork() in a process with threads
                pid = os.fork()
            if pid == 0:  # the child: publish, wait for Redis's answer, leave
                code = 1
                signal.alarm(10)  # a child stuck on the parent's lock dies of it
                try:
                    _published(publisher, 1)
                    code = 0 if publisher._line.conn is not parent_connection else 2
                finally:
                    os._exit(code)
        finally:
            publisher._line.lock.release()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        _published(publisher, 2)  # the parent's connection was left alone
        assert publisher._line.conn is parent_connection

    assert _received(layer, 3, publish) == [0, 1, 2]


def test_closing_reads_the_replies_still_owed_before_it_disconnects(
    layer: BaseChannelLayer, publisher: DirectPublisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_disconnect: list[int] = []

    async def publish() -> None:
        publisher.publish("g", {"type": "t", "n": 0})
        conn = publisher._line.conn
        monkeypatch.setattr(publisher._line, "_in", lambda conn: None)  # no reply read on the way out
        for n in range(1, 10):
            publisher.publish("g", {"type": "t", "n": n})
        monkeypatch.undo()
        owed = publisher._line.owed
        disconnect = conn.disconnect

        def watched(*args: object, **kwargs: object) -> None:
            at_disconnect.append(publisher._line.owed)
            disconnect(*args, **kwargs)

        monkeypatch.setattr(conn, "disconnect", watched)
        publisher.close()
        assert owed == 10 and at_disconnect == [0]  # every reply read, then disconnected
        assert not conn.is_connected and publisher._line.conn is None

    assert _received(layer, 10, publish) == list(range(10))
