"""The channel-layer hooks and sender of non-node processes, against a real Redis.

A node's dispatcher is a member of its queue's group on its own layer; here
the test's receiving layer stands in for it, subscribed to the same Redis.
Tests that stop, pause or restart Redis run a private redis-server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from channels.layers import BaseChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.test import override_settings

from conveyor.notify.groups import CONTROL_GROUP, EVENTS_GROUP, queue_group
from conveyor.notify.layer import ChannelLayerHooks, LayerSender, send_to_queue
from conveyor_site.layers import redis_channel_layer
from tests.conftest import require_services
from tests.e2e.test_redis_outage import PrivateRedis
from tests.services import redis_problem

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parents[2]


def _layer(url: str, prefix: str) -> BaseChannelLayer:
    return RedisPubSubChannelLayer(**redis_channel_layer(url, prefix)["CONFIG"])


@pytest.fixture
def prefix() -> str:
    """A channel prefix of the test's own, so nothing else on the Redis hears it."""
    return f"test{uuid.uuid4().hex[:8]}"


@pytest.fixture
def layer(prefix: str) -> BaseChannelLayer:
    problem = redis_problem(REDIS_URL)
    if problem:
        if require_services():
            pytest.fail(problem)
        pytest.skip(problem)
    return _layer(REDIS_URL, prefix)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A redis-server of the test's own, to stop, kill and restart."""
    server = PrivateRedis(tmp_path)
    try:
        server.start()
    except FileNotFoundError:
        pytest.skip("redis-server is not installed")
    yield server
    _resume(server)
    server.kill()


def _pause(server: PrivateRedis) -> None:
    """Stop the server's process: connections are still accepted (by the kernel), nothing is answered."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)


def _resume(server: PrivateRedis) -> None:
    if server.proc is not None and server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGCONT)


def _receive(
    layer: BaseChannelLayer, groups: list[str], count: int, produce: Callable[[], Any], timeout: float = 10
) -> list[dict]:
    """Join *groups* with one channel, run *produce* on a thread, return the first *count* messages."""

    async def scenario() -> list[dict]:
        channel = await layer.new_channel()
        for group in groups:
            await layer.group_add(group, channel)
        producing = asyncio.get_running_loop().run_in_executor(None, produce)
        messages = [await asyncio.wait_for(layer.receive(channel), timeout) for _ in range(count)]
        await producing
        return messages

    return asyncio.run(scenario())


def _quiet(layer: BaseChannelLayer, groups: list[str], produce: Callable[[], Any], quiet: float = 0.5) -> list[dict]:
    """Join *groups*, run *produce* on a thread, return every message until *quiet* s pass without one."""

    async def scenario() -> list[dict]:
        channel = await layer.new_channel()
        for group in groups:
            await layer.group_add(group, channel)
        await asyncio.get_running_loop().run_in_executor(None, produce)
        messages = [await asyncio.wait_for(layer.receive(channel), 10)]
        while True:
            try:
                messages.append(await asyncio.wait_for(layer.receive(channel), quiet))
            except TimeoutError:
                return messages

    return asyncio.run(scenario())


def _events_n(messages: list[dict]) -> list[int]:
    """The ``n`` of every event, in the order received."""
    return [e["n"] for m in messages if m["type"] == "conveyor.events" for e in m["events"]]


def _wait(predicate: Callable[[], Any], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- wakes and control messages --------------------------------------------------------


def test_wakes_from_django_code_reach_a_nodes_group_members_in_order(layer: BaseChannelLayer, prefix: str) -> None:
    queues = [f"q{i}" for i in range(10)]
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(REDIS_URL, prefix)}):
        hooks = ChannelLayerHooks()  # finds the layer as enqueue does: get_channel_layer()

        def wake_all() -> None:
            for queue in queues:
                hooks.wake([queue])

        messages = _receive(layer, [queue_group(q) for q in queues], len(queues), wake_all)
    assert [m["queue"] for m in messages] == queues
    assert {m["type"] for m in messages} == {"conveyor.wake"}


def test_messages_arrive_in_the_order_sent(layer: BaseChannelLayer) -> None:
    sender = LayerSender()

    def post_all() -> None:
        for i in range(50):
            sender.post(layer, "g", {"type": "t", "n": i})

    assert [m["n"] for m in _receive(layer, ["g"], 50, post_all)] == list(range(50))


def test_cancel_requests_and_queue_messages_reach_their_groups(layer: BaseChannelLayer, prefix: str) -> None:
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(REDIS_URL, prefix)}):

        def send() -> None:
            ChannelLayerHooks().cancel_running([("t1", "l1")])
            send_to_queue("q", {"type": "conveyor.fire_group", "queue": "q", "group": "g", "task_type": "x"})

        messages = _receive(layer, [CONTROL_GROUP, queue_group("q")], 2, send)
    assert messages == [
        {"type": "conveyor.cancel", "refs": [["t1", "l1"]]},
        {"type": "conveyor.fire_group", "queue": "q", "group": "g", "task_type": "x"},
    ]


def test_the_caller_does_not_wait_for_redis(private_redis: PrivateRedis) -> None:
    layer = _layer(private_redis.url, "p")
    sender = LayerSender(send_timeout=60)
    hooks = ChannelLayerHooks(layer, sender)
    queues = [f"q{i}" for i in range(20)]
    returned: list[float] = []

    def wake_while_redis_is_stopped() -> None:
        _pause(private_redis)
        try:
            start = time.monotonic()
            for queue in queues:
                hooks.wake([queue])
            returned.append(time.monotonic() - start)
            assert sender.in_line == len(queues)  # none has reached Redis
        finally:
            _resume(private_redis)

    messages = _receive(layer, [queue_group(q) for q in queues], len(queues), wake_while_redis_is_stopped)
    # Waiting for Redis even once would have taken until it came back, or the 60 s timeout.
    assert returned[0] < 2
    assert [m["queue"] for m in messages] == queues  # all of them, in order, once it is back


def test_wakes_of_one_queue_still_in_line_go_out_as_one(private_redis: PrivateRedis) -> None:
    layer = _layer(private_redis.url, "p")
    sender = LayerSender(send_timeout=60, wake_interval=0)  # (the interval has tests of its own)
    hooks = ChannelLayerHooks(layer, sender)
    later = datetime.now(UTC) + timedelta(hours=1)

    def wake_while_redis_is_stopped() -> None:
        _pause(private_redis)
        try:
            for _ in range(50):
                hooks.wake(["q"])
            hooks.wake(["q"], at=later)  # another message: not the wake now
            hooks.wake(["other"])
        finally:
            _resume(private_redis)
        assert sender.flush(10)
        hooks.wake(["q"])  # nothing is in line any more: a message of its own

    messages = _quiet(layer, [queue_group("q"), queue_group("other")], wake_while_redis_is_stopped)
    wakes = [(m["queue"], m["at"]) for m in messages]
    # The first wake may have left before Redis stopped, the second stands for the other 48 (or 49).
    assert wakes in (
        [("q", None), ("q", later.timestamp()), ("other", None), ("q", None)],
        [("q", None), ("q", None), ("q", later.timestamp()), ("other", None), ("q", None)],
    )
    assert sender.coalesced == 50 - (len(wakes) - 3)


def test_a_queue_is_woken_at_most_once_an_interval_and_the_last_wake_is_never_lost(layer: BaseChannelLayer) -> None:
    sender = LayerSender(wake_interval=0.2)
    hooks = ChannelLayerHooks(layer, sender)
    posted: list[float] = []

    def wake_often() -> None:
        for _ in range(20):  # 20 wakes over 0.5 s: three or four intervals
            hooks.wake(["q"])
            posted.append(time.monotonic())
            time.sleep(0.025)

    received: list[float] = []

    async def scenario() -> None:
        channel = await layer.new_channel()
        await layer.group_add(queue_group("q"), channel)
        producer = asyncio.get_running_loop().run_in_executor(None, wake_often)
        while True:
            try:
                await asyncio.wait_for(layer.receive(channel), 1.0)
            except TimeoutError:
                break
            received.append(time.monotonic())
        await producer

    asyncio.run(scenario())
    # One wake leaves at once, then at most one an interval (held, standing for the rest): for
    # posts spread over d seconds, at most 2 + d / interval, however slow the machine ran them.
    assert 2 <= len(received) <= 2 + (posted[-1] - posted[0]) / 0.2
    assert received[-1] >= posted[-1]  # the last wake asked for went out after it was asked for
    assert sender.coalesced == 20 - len(received)


def test_a_flush_sends_a_held_wake_at_once(layer: BaseChannelLayer) -> None:
    sender = LayerSender(wake_interval=60.0)  # without the flush it would wait a minute
    hooks = ChannelLayerHooks(layer, sender)

    def wake_twice_and_flush() -> None:
        hooks.wake(["q"])
        _wait(lambda: sender.in_line == 0)
        hooks.wake(["q"])  # held: the first left less than a minute ago
        assert sender.flush(5)

    messages = _quiet(layer, [queue_group("q")], wake_twice_and_flush)
    assert [m["queue"] for m in messages] == ["q", "q"]


def test_a_message_redis_refuses_is_logged_not_raised_and_the_line_goes_on(
    layer: BaseChannelLayer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    admin = redis.Redis.from_url(REDIS_URL)
    user = f"conveyor_test_{uuid.uuid4().hex[:8]}"
    admin.execute_command("ACL", "SETUSER", user, "on", ">p", "~*", "&*", "+@all", "-publish")
    try:
        host = {"address": REDIS_URL, "username": user, "password": "p"}
        refused = RedisPubSubChannelLayer(hosts=[host], prefix=prefix)
        sender = LayerSender()
        hooks = ChannelLayerHooks(refused, sender)
        hooks.wake(["a"])  # the enqueue that asked for it has committed: never raise
        assert sender.flush(5)
    finally:
        admin.execute_command("ACL", "DELUSER", user)
    assert "could not reach the channel layer" in caplog.text and "no permissions" in caplog.text

    def post() -> None:
        sender.post(layer, "g", {"type": "t", "n": 1})

    assert [m["n"] for m in _receive(layer, ["g"], 1, post)] == [1]  # the same sender goes on


def test_a_wake_with_no_redis_to_reach_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    sender = LayerSender()
    hooks = ChannelLayerHooks(_layer("redis://127.0.0.1:1/0", "dead"), sender)
    hooks.wake(["default"])
    assert sender.flush(30)
    assert "could not reach the channel layer" in caplog.text


def test_a_message_redis_does_not_answer_is_given_up_and_the_line_goes_on(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    layer = _layer(private_redis.url, "p")
    sender = LayerSender(send_timeout=0.4)

    def post_while_redis_hangs() -> None:
        _pause(private_redis)
        try:
            sender.post(layer, "g", {"type": "t", "n": 0})
            _wait(lambda: "given up" in caplog.text)
            assert sender.in_line == 0
        finally:
            _resume(private_redis)
        sender.post(layer, "g", {"type": "t", "n": 1})

    # The first may still arrive (it was written before it was given up); the second must.
    assert [m["n"] for m in _quiet(layer, ["g"], post_while_redis_hangs)] in ([0, 1], [1])


def test_one_connection_to_redis_carries_every_message(private_redis: PrivateRedis) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    sender = LayerSender()
    layer = _layer(private_redis.url, "p")
    for i in range(30):
        sender.post(layer, "nobody", {"type": "t", "n": i})
        if i % 10 == 0:
            assert sender.flush(5)  # (so the loop goes idle between messages too)
    assert sender.flush(5)
    clients = admin.client_list(_type="normal")
    assert len(clients) == 2  # the sender's and this test's


def test_a_killed_connection_reconnects_and_delivers(private_redis: PrivateRedis) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    layer = _layer(private_redis.url, "p")
    sender = LayerSender()

    def post_around_a_kill() -> None:
        sender.post(layer, "g", {"type": "t", "n": 0})
        assert sender.flush(5)
        # Every plain connection but this one: the sender's (the receiver's is a subscriber).
        assert admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes") == 1
        sender.post(layer, "g", {"type": "t", "n": 1})
        assert sender.flush(10)

    assert [m["n"] for m in _receive(layer, ["g"], 2, post_around_a_kill)] == [0, 1]


def test_after_a_redis_restart_messages_are_delivered_again(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
) -> None:
    layer = _layer(private_redis.url, "p")
    sender = LayerSender()
    sender.post(layer, "nobody", {"type": "t"})
    assert sender.flush(5)
    private_redis.kill()
    sender.post(layer, "g", {"type": "t", "n": 0})  # lost, and logged
    assert sender.flush(30)
    assert "could not reach the channel layer" in caplog.text
    private_redis.start()

    def post() -> None:
        sender.post(layer, "g", {"type": "t", "n": 1})

    assert [m["n"] for m in _receive(_layer(private_redis.url, "p"), ["g"], 1, post)] == [1]


PRODUCER_PREAMBLE = """
import os, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # (a fork of a process with threads, on purpose)
os.environ["DJANGO_SETTINGS_MODULE"] = "conveyor_site.settings"
os.environ.pop("REDIS_URL", None)
import django
django.setup()
from conveyor.notify.layer import ChannelLayerHooks, sender
from tests.unit.test_layer_sender import _layer
layer = _layer(sys.argv[1], sys.argv[2])
hooks = ChannelLayerHooks(layer)
"""


def _producer(script: str, url: str, prefix: str) -> Callable[[], None]:
    """A producer process running *script* after ``PRODUCER_PREAMBLE``; it must exit 0."""

    def run() -> None:
        import subprocess

        argv = [sys.executable, "-c", PRODUCER_PREAMBLE + script, url, prefix]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    return run


EXITING_PRODUCER = """
for i in range(20):
    sender.post_events(layer, [{"n": i}])
hooks.wake(["last"])
# exits at once: only the exit flush can deliver these
"""


def test_messages_in_line_when_the_process_exits_are_delivered(layer: BaseChannelLayer, prefix: str) -> None:
    # By host name, as most deployments name Redis: resolving it at exit
    # needs a thread pool the interpreter may already have shut down.
    url = REDIS_URL.replace("127.0.0.1", "localhost")
    messages = _quiet(layer, [EVENTS_GROUP, queue_group("last")], _producer(EXITING_PRODUCER, url, prefix))
    assert _events_n(messages) == list(range(20))
    assert [m["queue"] for m in messages if m["type"] == "conveyor.wake"] == ["last"]


FORKING_PRODUCER = """
hooks.wake(["parent"])
sender.post_events(layer, [{"n": 0}])
sender.flush(timeout=5)  # the parent's loop thread is running: the child gets none of it
sender._lock.acquire()  # as if another thread were posting at the fork
pid = os.fork()
if pid == 0:
    import signal
    signal.alarm(10)  # a child stuck on the parent's lock dies of it
    hooks.wake(["child"])
    sender.post_events(layer, [{"n": 1}])
    os._exit(0 if sender.flush(timeout=5) else 1)
sender._lock.release()
_, status = os.waitpid(pid, 0)
hooks.wake(["parent"])  # the parent's sender goes on
sender.flush(timeout=5)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_sends_on_its_own_and_its_messages_arrive(layer: BaseChannelLayer, prefix: str) -> None:
    groups = [EVENTS_GROUP, queue_group("parent"), queue_group("child")]
    messages = _quiet(layer, groups, _producer(FORKING_PRODUCER, REDIS_URL, prefix))
    assert _events_n(messages) == [0, 1]
    assert [m["queue"] for m in messages if m["type"] == "conveyor.wake"] == ["parent", "child", "parent"]


def test_hooks_reach_other_processes_only_through_redis(prefix: str) -> None:
    with override_settings(CHANNEL_LAYERS={"default": redis_channel_layer(REDIS_URL, prefix)}):
        assert ChannelLayerHooks().reaches_other_processes  # so an enqueue looks for offers
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        hooks = ChannelLayerHooks()
        assert not hooks.reaches_other_processes  # nobody to reach: a plain INSERT
        hooks.wake(["q"])  # and nothing is sent


def test_threads_sending_first_at_the_same_moment_start_one_loop(layer: BaseChannelLayer) -> None:
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


# -- events from processes that are not a node ---------------------------------------


def test_flush_waits_until_what_was_sent_without_waiting_has_gone_out(layer: BaseChannelLayer) -> None:
    sender = LayerSender()
    flushed: list[bool] = []

    def send_all() -> None:
        for i in range(50):
            sender.post_events(layer, [{"n": i}])
            sender.post(layer, "g", {"type": "t", "n": i})
        flushed.append(sender.flush(timeout=5))
        flushed.append(sender.in_line == 0)

    messages = _quiet(layer, [EVENTS_GROUP, "g"], send_all)
    assert _events_n(messages) == list(range(50))
    assert [m["n"] for m in messages if m["type"] == "t"] == list(range(50))
    assert flushed == [True, True]


def test_events_sent_close_together_go_out_as_one_message_in_order(layer: BaseChannelLayer) -> None:
    sender = LayerSender()

    def send_all() -> None:
        for i in range(30):
            sender.post_events(layer, [{"n": i}])

    messages = _quiet(layer, [EVENTS_GROUP], send_all)
    # 30 sends within far less than the flush delay: one message (two if
    # this machine stalled past the delay), nothing lost or reordered.
    assert 1 <= len(messages) <= 2
    assert _events_n(messages) == list(range(30))
    assert all(m["type"] == "conveyor.events" for m in messages)


def test_flush_sends_gathered_events_without_waiting_for_the_delay(layer: BaseChannelLayer) -> None:
    sender = LayerSender(flush_delay=30.0)  # only a flush can send them in time
    flushed: list[bool] = []

    def send_and_flush() -> None:
        sender.post_events(layer, [{"n": 1}, {"n": 2}])
        flushed.append(sender.flush(timeout=5))

    assert _events_n(_quiet(layer, [EVENTS_GROUP], send_and_flush)) == [1, 2]
    assert flushed == [True]


def test_a_full_backlog_drops_what_does_not_fit_and_counts_it(private_redis: PrivateRedis) -> None:
    layer = _layer(private_redis.url, "p")
    sender = LayerSender(backlog_max=5, batch_max=2, flush_delay=30.0, send_timeout=60)
    _pause(private_redis)  # nothing settles meanwhile
    try:
        sender.post_events(layer, [{"n": 0}, {"n": 1}])
        sender.post_events(layer, [{"n": 2}])  # a second message: the first is full
        sender.post_events(layer, [{"n": 3}])
        sender.post(layer, "g", {"type": "t"})  # a wake counts one: 5 held, the limit
        assert sender.dropped == 0
        sender.post_events(layer, [{"n": 4}])  # the limit counts events, not messages
        sender.post(layer, "g", {"type": "t"})
        assert sender.dropped == 2
    finally:
        _resume(private_redis)
    assert sender.flush(10)
    assert sender.in_line == 0
    sender.post_events(layer, [{"n": 5}])  # room again once they went
    assert sender.dropped == 2
    assert sender.flush(5)


def test_full_messages_go_out_at_once_and_in_order(layer: BaseChannelLayer) -> None:
    sender = LayerSender(batch_max=2, flush_delay=30.0)  # only a full message or a flush sends

    def send_all() -> None:
        for i in range(5):
            sender.post_events(layer, [{"n": i}])
        sender.flush(timeout=5)

    messages = _quiet(layer, [EVENTS_GROUP], send_all)
    assert [[e["n"] for e in m["events"]] for m in messages] == [[0, 1], [2, 3], [4]]


def test_one_call_with_more_events_than_a_message_holds_is_split_and_partly_accepted(
    layer: BaseChannelLayer,
) -> None:
    sender = LayerSender(batch_max=2, backlog_max=4, flush_delay=30.0)

    def send_and_flush() -> None:
        sender.post_events(layer, [{"n": i} for i in range(5)])  # room for 4: the fifth is dropped
        sender.flush(timeout=5)

    messages = _quiet(layer, [EVENTS_GROUP], send_and_flush)
    assert [[e["n"] for e in m["events"]] for m in messages] == [[0, 1], [2, 3]]
    assert sender.dropped == 1


def test_events_0_stops_publishing_from_django_code_too(layer: BaseChannelLayer) -> None:
    hooks = ChannelLayerHooks(layer)
    assert hooks.wants_events
    with override_settings(CONVEYOR={"EVENTS": False}):
        assert not hooks.wants_events


class _Refusing(LayerSender):
    """A sender that cannot take anything, as at interpreter shutdown."""

    def post(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    post_events = post


def test_messages_that_cannot_be_handed_on_are_logged_not_raised(
    layer: BaseChannelLayer, caplog: pytest.LogCaptureFixture
) -> None:
    hooks = ChannelLayerHooks(layer, _Refusing())
    hooks.publish([])  # the change they describe has committed: never raise to the caller
    hooks.wake(["q"])
    assert "could not hand events to the channel layer" in caplog.text
    assert "could not hand a message for conveyor.q.q to the channel layer" in caplog.text
