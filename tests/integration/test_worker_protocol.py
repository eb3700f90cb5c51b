"""The worker WebSocket protocol, spoken by a raw ``websockets`` client to a real dev node.

No SDK: every frame is written by hand, so these tests pin the wire itself
(``conveyor/sdk/protocol.py``, ``conveyor/dispatch/frames.py``,
``conveyor/dispatch/consumer.py``). One dev node (SQLite + in-memory layer)
serves the whole module; each test works in queues of its own.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from conveyor import __version__
from conveyor.sdk import protocol as p
from tests.e2e.conftest import base_env, dev_node
from tests.e2e.support import ROOT, NodeProcess, wait_for

pytestmark = pytest.mark.slow

WAIT = 20.0  # seconds for anything the node does on its own


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    yield from dev_node(tmp_path_factory, "protocol")


@pytest.fixture
def queue() -> str:
    return f"proto-{uuid.uuid4().hex[:10]}"


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


# -- a small hand-written worker ------------------------------------------------------------


class Raw:
    """One WebSocket to the node, with a buffer of received frames."""

    def __init__(self, ws: websockets.ClientConnection, http: httpx.AsyncClient) -> None:
        self.ws = ws
        self.http = http
        self.buffer: list[dict[str, Any]] = []

    async def send(self, *frames: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frames[0] if len(frames) == 1 else list(frames)))

    async def send_text(self, text: str) -> None:
        await self.ws.send(text)

    async def frame(self, kind: str | None = None, timeout: float = WAIT) -> dict[str, Any]:
        """The next frame (of *kind*, skipping pings); fail after *timeout*."""
        async with asyncio.timeout(timeout):
            while True:
                while self.buffer:
                    frame = self.buffer.pop(0)
                    if frame["type"] == p.PING and kind != p.PING:
                        continue
                    if kind is None or frame["type"] == kind:
                        return frame
                    raise AssertionError(f"expected a {kind} frame, got {frame}")
                message = await self.ws.recv()
                data = json.loads(message)
                self.buffer.extend(data if isinstance(data, list) else [data])

    async def hello(self, queues: dict[str, int], concurrency: int = 1, **extra: Any) -> dict[str, Any]:
        await self.send({"type": p.HELLO, "queues": queues, "concurrency": concurrency, **extra})
        return await self.frame(p.WELCOME)

    async def ending(self, timeout: float = WAIT) -> tuple[list[dict[str, Any]], int | None]:
        """Every frame until the server closes, and the close code."""
        frames = list(self.buffer)
        self.buffer.clear()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    data = json.loads(await self.ws.recv())
                    frames.extend(data if isinstance(data, list) else [data])
        except websockets.ConnectionClosed:
            pass
        return [f for f in frames if f["type"] != p.PING], self.ws.close_code

    # -- the REST side --------------------------------------------------------------------

    async def enqueue(self, **body: Any) -> dict[str, Any]:
        body.setdefault("type", "proto:test")
        # Keep completed rows readable (the default retention purges them on
        # the reaper's next pass, which could race the assertion).
        body.setdefault("retention", "1h")
        response = await self.http.post("/api/v1/tasks", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    async def task(self, task_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/api/v1/tasks/{task_id}")
        assert response.status_code == 200, response.text
        return response.json()

    async def task_until(self, task_id: str, predicate: Any, what: str) -> dict[str, Any]:
        """Poll the task until *predicate* holds (the node settles off the socket's path)."""
        async with asyncio.timeout(WAIT):
            while True:
                task = await self.task(task_id)
                if predicate(task):
                    return task
                await asyncio.sleep(0.02)
        raise AssertionError(f"task {task_id} never reached: {what}")  # pragma: no cover


@asynccontextmanager
async def worker(node: NodeProcess) -> AsyncIterator[Raw]:
    ws_url = node.url.replace("http://", "ws://") + p.WORKER_PATH
    async with httpx.AsyncClient(base_url=node.url, timeout=30) as http, websockets.connect(ws_url) as ws:
        yield Raw(ws, http)


async def refused(node: NodeProcess, *messages: str) -> tuple[list[dict[str, Any]], int | None]:
    """Send raw *messages* on a fresh socket; return what came back and the close code."""
    async with worker(node) as w:
        for message in messages:
            await w.send_text(message)
        return await w.ending()


def assert_protocol_error(frames: list[dict[str, Any]], code: int | None, *words: str) -> None:
    errors = [f for f in frames if f["type"] == p.ERROR]
    assert code == p.CLOSE_PROTOCOL_ERROR == 4400, (code, frames)
    assert len(errors) == 1, frames
    assert errors[0]["code"] == "invalid_frame"
    for word in words:
        assert word in errors[0]["message"], errors[0]


# -- the handshake ---------------------------------------------------------------------------


def test_hello_is_answered_with_a_welcome(node, queue):
    async def scenario():
        async with worker(node) as w:
            return await w.hello({queue: 1}, concurrency=2, sdk_version="0.1.0", labels={"host": "test"})

    welcome = run(scenario())

    assert welcome["type"] == p.WELCOME
    assert welcome["protocol"] == p.PROTOCOL_VERSION == 1
    assert isinstance(welcome["session_id"], str) and len(welcome["session_id"]) == 26
    assert welcome["lease_ttl"] == 60
    assert welcome["heartbeat_interval"] == pytest.approx(welcome["lease_ttl"] / 3)
    assert welcome["server_version"] == __version__
    assert isinstance(welcome["min_sdk_version"], str) and welcome["min_sdk_version"]


def test_every_session_gets_its_own_id(node, queue):
    async def scenario():
        async with worker(node) as a, worker(node) as b:
            return (await a.hello({queue: 1}))["session_id"], (await b.hello({queue: 1}))["session_id"]

    first, second = run(scenario())

    assert first != second


def test_a_first_frame_that_is_not_hello_is_refused_with_4400(node):
    frame = {"type": "result", "task_id": "x", "outcome": "success"}

    frames, code = run(refused(node, json.dumps(frame)))

    assert_protocol_error(frames, code, "first frame must be hello", "result")


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("{not json", ["not valid JSON"]),
        ("42", ["JSON object"]),
        ('"hello"', ["JSON object"]),
        ("[1, 2]", ["JSON object"]),
        ("[]", ["empty array"]),
        ('{"queues": {"a": 1}}', ["'type'"]),
        ('{"type": 7}', ["'type'"]),
    ],
    ids=["malformed-json", "number", "string", "array-of-numbers", "empty-array", "no-type", "numeric-type"],
)
def test_a_message_that_is_not_frames_is_refused_with_4400(node, message, words):
    frames, code = run(refused(node, message))

    assert_protocol_error(frames, code, *words)


@pytest.mark.parametrize(
    ("hello", "words"),
    [
        ({"queues": {}, "concurrency": 1}, ["queues"]),
        ({"concurrency": 1}, ["queues"]),
        ({"queues": ["a"], "concurrency": 1}, ["queues"]),
        ({"queues": {"a": 0}, "concurrency": 1}, ["weight", "'a'"]),
        ({"queues": {"a": True}, "concurrency": 1}, ["weight"]),
        ({"queues": {"a": 1}, "concurrency": 0}, ["concurrency"]),
        ({"queues": {"a": 1}}, ["concurrency"]),
        ({"queues": {"a": 1}, "concurrency": "4"}, ["concurrency"]),
        ({"queues": {"bad name!": 1}, "concurrency": 1}, ["queue name", "bad name!"]),
        ({"queues": {"-leading": 1}, "concurrency": 1}, ["queue name"]),
        ({"queues": {"a": 1}, "concurrency": 1, "labels": {"k": 1}}, ["labels"]),
        ({"queues": {"a": 1}, "concurrency": 1, "batch_types": "report"}, ["batch_types"]),
        ({"queues": {"a": 1}, "concurrency": 1, "min_server_version": 2}, ["min_server_version"]),
        ({"queues": {"a": 1}, "concurrency": 1, "prefetch": -1}, ["prefetch", "0 to 1000"]),
        ({"queues": {"a": 1}, "concurrency": 1, "prefetch": 1001}, ["prefetch"]),
    ],
    ids=[
        "queues-empty",
        "queues-missing",
        "queues-list",
        "weight-0",
        "weight-bool",
        "concurrency-0",
        "concurrency-missing",
        "concurrency-string",
        "bad-queue-name",
        "queue-name-leading-dash",
        "labels",
        "batch-types",
        "min-server-version-type",
        "prefetch-negative",
        "prefetch-too-large",
    ],
)
def test_a_hello_with_bad_fields_is_refused_with_4400(node, hello, words):
    frames, code = run(refused(node, json.dumps({"type": "hello", **hello})))

    assert_protocol_error(frames, code, "hello", *words)


def test_a_deeply_nested_message_is_refused_with_4400(node):
    # json.loads raises RecursionError, not ValueError, past its nesting limit.
    frames, code = run(refused(node, "[" * 100_000))

    assert_protocol_error(frames, code, "not valid JSON")


def test_a_text_message_that_is_not_utf8_is_closed_with_1007_and_logs_no_traceback(node):
    # Found by bench/fuzz.py: uvicorn logged every such message as an ERROR with a traceback.
    async def scenario():
        async with worker(node) as w:
            await w.ws.send(b'{"type": "hello\xff\xfe"}', text=True)
            return await w.ending()

    before = len(node.output())
    frames, code = run(scenario())

    assert code == 1007 and frames == []
    said = "Invalid UTF-8 sequence received from client."
    wait_for(lambda: said in node.output()[before:], WAIT, what="the node's log line")  # read by a thread
    logged = node.output()[before:]
    (line,) = [line for line in logged.splitlines() if said in line]
    assert "INFO" in line and "Traceback" not in logged, logged[-2000:]


def test_an_error_frame_quoting_a_huge_frame_type_is_cut_short(node):
    # Found by bench/fuzz.py: the message quoted all 100,000 characters, to the worker and the log.
    frames, code = run(refused(node, json.dumps({"type": "x" * 100_000})))

    assert_protocol_error(frames, code, "first frame must be hello", "(100037 characters)")
    assert len(frames[0]["message"]) < 600


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_json_constants_are_refused_with_4400(node, queue, constant):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            await w.send_text('{"type": "progress", "task_id": "x", "percent": ' + constant + "}")
            return await w.ending()

    frames, code = run(scenario())

    assert_protocol_error(frames, code, constant)


def test_a_binary_message_is_refused_with_4400(node):
    async def scenario():
        async with worker(node) as w:
            await w.ws.send(b'{"type": "hello"}')
            return await w.ending()

    frames, code = run(scenario())

    assert_protocol_error(frames, code, "text")


def test_a_second_hello_is_refused_with_4400(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            await w.send({"type": "hello", "queues": {queue: 1}, "concurrency": 1})
            return await w.ending()

    frames, code = run(scenario())

    assert_protocol_error(frames, code, "hello was already received")


def test_an_unknown_frame_type_is_refused_with_4400(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            await w.send({"type": "teleport", "task_id": "x"})
            return await w.ending()

    frames, code = run(scenario())

    assert_protocol_error(frames, code, "unknown frame type", "teleport")


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        ({"type": "result", "outcome": "success"}, ["task_id"]),
        ({"type": "result", "task_id": "x", "outcome": "maybe"}, ["outcome"]),
        ({"type": "heartbeat", "task_ids": "x"}, ["task_ids"]),
        ({"type": "progress", "task_id": "x", "percent": "half"}, ["percent"]),
        ({"type": "credit", "n": 0}, ["'n'"]),
        ({"type": "batch_result", "lease_id": "l", "results": {}}, ["results"]),
    ],
    ids=["result-no-id", "result-bad-outcome", "heartbeat-ids", "progress-percent", "credit-zero", "batch-results"],
)
def test_a_malformed_frame_after_hello_is_refused_with_4400(node, queue, frame, words):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            await w.send(frame)
            return await w.ending()

    frames, code = run(scenario())

    assert_protocol_error(frames, code, *words)


def test_a_worker_needing_a_newer_server_is_closed_with_4406(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.send({"type": "hello", "queues": {queue: 1}, "concurrency": 1, "min_server_version": "99.0.0"})
            return await w.ending()

    frames, code = run(scenario())

    assert code == p.CLOSE_VERSION == 4406
    assert [f["type"] for f in frames] == [p.ERROR]
    assert frames[0]["code"] == "version"
    assert "99.0.0" in frames[0]["message"]


def test_a_worker_content_with_this_server_is_welcomed(node, queue):
    async def scenario():
        async with worker(node) as w:
            return await w.hello({queue: 1}, min_server_version=__version__)

    assert run(scenario())["server_version"] == __version__


def test_an_sdk_older_than_the_servers_minimum_is_closed_with_4406(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.send({"type": "hello", "queues": {queue: 1}, "concurrency": 1, "sdk_version": "0.0.1"})
            return await w.ending()

    frames, code = run(scenario())

    assert code == 4406
    assert frames[0]["code"] == "version"


def test_no_hello_within_the_timeout_closes_with_4408(node):
    async def scenario():
        async with worker(node) as w:
            return await w.ending(timeout=15)

    frames, code = run(scenario())

    assert code == p.CLOSE_HELLO_TIMEOUT == 4408
    assert [f["code"] for f in frames if f["type"] == p.ERROR] == ["hello_timeout"]


# -- dispatch and results -----------------------------------------------------------------------


def test_a_dispatch_frame_carries_the_task(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(
                queue=queue,
                type="proto:fields",
                json={"to": "a@b.c"},
                priority=7,
                max_retry=3,
                metadata={"tenant": "acme"},
                deadline="2099-01-01T00:00:00Z",
            )
            return task, await w.frame(p.DISPATCH)

    task, frame = run(scenario())

    assert frame["task_id"] == task["id"]
    assert isinstance(frame["lease_id"], str) and frame["lease_id"]
    assert frame["queue"] == queue
    assert frame["task_type"] == "proto:fields"
    assert json.loads(base64.b64decode(frame["payload"])) == {"to": "a@b.c"}
    assert frame["content_type"] == "application/json"
    assert (frame["attempt"], frame["max_retry"], frame["priority"]) == (1, 3, 7)
    assert frame["metadata"] == {"tenant": "acme"}
    assert frame["deadline"] == "2099-01-01T00:00:00Z"
    assert frame["enqueued_at"] == task["enqueued_at"]


def test_a_dispatch_frame_of_an_unbounded_task_has_a_null_deadline_and_empty_metadata(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            await w.enqueue(
                queue=queue, payload=base64.b64encode(b"\x00\xff").decode(), content_type="application/octet-stream"
            )
            return await w.frame(p.DISPATCH)

    frame = run(scenario())

    assert frame["deadline"] is None
    assert frame["metadata"] == {}
    assert base64.b64decode(frame["payload"]) == b"\x00\xff"
    assert frame["content_type"] == "application/octet-stream"


def test_a_success_result_completes_the_task(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            dispatch = await w.frame(p.DISPATCH)
            await w.send(
                {
                    "type": "result",
                    "task_id": task["id"],
                    "lease_id": dispatch["lease_id"],
                    "outcome": "success",
                    "result": {"ok": True},
                }
            )
            return await w.task_until(task["id"], lambda t: t["state"] == "completed", "completed")

    stored = run(scenario())

    assert stored["state"] == "completed"
    assert stored["result"] is not None


def test_a_retry_result_sends_the_task_to_retry_with_its_error(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            await w.send({"type": "result", "task_id": task["id"], "outcome": "retry", "error": "smtp timeout"})
            # Once its backoff passes the task is pushed to this worker again
            # (active): on a busy machine a poll can miss the retry state.
            return await w.task_until(task["id"], lambda t: t["retried"] == 1, "retried")

    stored = run(scenario())

    assert (stored["retried"], stored["last_error"]) == (1, "smtp timeout")
    assert stored["state"] in ("retry", "active")


def test_a_retry_results_traceback_is_kept_with_its_attempt_and_names_the_session(node, queue):
    async def scenario():
        async with worker(node) as w:
            welcome = await w.hello({queue: 1}, labels={"zone": "eu-1"})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            await w.send({"type": "result", "task_id": task["id"], "outcome": "retry", "error": "smtp timeout",
                          "traceback": "Traceback (most recent call last):\n  File \"mail.py\"\nTimeoutError\n"})  # fmt: skip
            stored = await w.task_until(task["id"], lambda t: t["retried"] == 1, "retried")
            return welcome, stored

    welcome, stored = run(scenario())

    assert stored["last_error"] == "smtp timeout"
    (attempt,) = [a for a in stored["attempts"] if a["outcome"] == "retry"]
    assert attempt["error"] == 'smtp timeout\n\nTraceback (most recent call last):\n  File "mail.py"\nTimeoutError\n'
    assert attempt["worker"] == {"session": welcome["session_id"], "labels": {"zone": "eu-1"}}
    assert attempt["node"] == welcome["node"]


def test_several_frames_in_one_message_are_all_handled(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=2)
            first = await w.enqueue(queue=queue)
            second = await w.enqueue(queue=queue)
            dispatched = {(await w.frame(p.DISPATCH))["task_id"], (await w.frame(p.DISPATCH))["task_id"]}
            assert dispatched == {first["id"], second["id"]}
            await w.send(
                {"type": "result", "task_id": first["id"], "outcome": "success"},
                {"type": "result", "task_id": second["id"], "outcome": "success"},
            )
            done = [
                await w.task_until(t["id"], lambda t: t["state"] == "completed", "completed") for t in (first, second)
            ]
            return [t["state"] for t in done]

    assert run(scenario()) == ["completed", "completed"]


def test_a_malformed_frame_after_a_dispatch_releases_the_task(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            assert (await w.task(task["id"]))["state"] == "active"
            await w.send_text("{this is not json")
            frames, code = await w.ending()
            stored = await w.task_until(task["id"], lambda t: t["state"] != "active", "not active")
            return frames, code, stored

    frames, code, stored = run(scenario())

    assert_protocol_error(frames, code, "not valid JSON")
    assert (stored["state"], stored["retried"]) == ("pending", 0)


def test_frames_before_a_bad_one_in_the_same_message_are_still_handled(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=2)
            done = await w.enqueue(queue=queue)
            held = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            await w.frame(p.DISPATCH)
            await w.send({"type": "result", "task_id": done["id"], "outcome": "success"}, {"type": "bogus"})
            frames, code = await w.ending()
            first = await w.task_until(done["id"], lambda t: t["state"] == "completed", "completed")
            second = await w.task_until(held["id"], lambda t: t["state"] == "pending", "released")
            return frames, code, first, second

    frames, code, first, second = run(scenario())

    assert_protocol_error(frames, code, "bogus")
    assert first["state"] == "completed"
    assert (second["state"], second["retried"]) == ("pending", 0)


def test_a_heartbeat_extends_the_lease(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            before = await w.task_until(task["id"], lambda t: t["lease_expires_at"], "leased")
            await w.send({"type": "heartbeat", "task_ids": [task["id"]]})
            after = await w.task_until(
                task["id"], lambda t: t["lease_expires_at"] > before["lease_expires_at"], "a later lease expiry"
            )
            return before, after

    before, after = run(scenario())

    assert after["state"] == "active"
    assert after["lease_expires_at"] > before["lease_expires_at"]


def test_progress_updates_the_tasks_progress(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            await w.send({"type": "progress", "task_id": task["id"], "percent": 42, "message": "halfway-ish"})
            first = await w.task_until(task["id"], lambda t: t["progress"] == 42, "progress 42")
            await w.send({"type": "progress", "task_id": task["id"], "percent": 250})
            clamped = await w.task_until(task["id"], lambda t: t["progress"] == 100, "progress clamped to 100")
            return first, clamped

    first, clamped = run(scenario())

    assert (first["progress"], first["progress_message"]) == (42, "halfway-ish")
    assert clamped["progress"] == 100


def test_concurrency_one_waits_for_a_credit_before_a_second_dispatch(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=1)
            first = await w.enqueue(queue=queue)
            second = await w.enqueue(queue=queue)
            got = await w.frame(p.DISPATCH)
            with pytest.raises(TimeoutError):
                await w.frame(p.DISPATCH, timeout=1.0)  # no free slot: nothing more is pushed
            waiting = await w.task(second["id"] if got["task_id"] == first["id"] else first["id"])
            await w.send({"type": "credit", "n": 1})
            extra = await w.frame(p.DISPATCH)
            return first, second, got, waiting, extra

    first, second, got, waiting, extra = run(scenario())

    assert waiting["state"] == "pending"
    assert {got["task_id"], extra["task_id"]} == {first["id"], second["id"]}


def test_weighted_queues_never_get_more_slots_than_the_declared_concurrency(node, queue):
    async def scenario():
        async with worker(node) as w:
            queues = {f"{queue}-a": 1, f"{queue}-b": 1, f"{queue}-c": 100}
            for name in queues:
                for _ in range(1 if name != f"{queue}-c" else 12):
                    await w.enqueue(queue=name)
            await w.hello(queues, concurrency=10)
            got = []
            try:
                while True:
                    got.append(await w.frame(p.DISPATCH, timeout=2.0))
            except TimeoutError:
                pass
            return got

    assert len(run(scenario())) == 10


def test_a_result_frees_the_slot_for_the_next_dispatch(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=1)
            await w.enqueue(queue=queue)
            await w.enqueue(queue=queue)
            got = await w.frame(p.DISPATCH)
            await w.send({"type": "result", "task_id": got["task_id"], "outcome": "success"})
            return got, await w.frame(p.DISPATCH)

    got, following = run(scenario())

    assert following["task_id"] != got["task_id"]


def test_closing_normally_releases_tasks_in_flight(node, queue):
    async def scenario():
        async with worker(node) as w:
            await w.hello({queue: 1})
            task = await w.enqueue(queue=queue)
            await w.frame(p.DISPATCH)
            await w.ws.close(code=1000)
            return await w.task_until(task["id"], lambda t: t["state"] != "active", "not active")

    stored = run(scenario())

    assert (stored["state"], stored["retried"]) == ("pending", 0)


# -- the SDK stands alone -----------------------------------------------------------------------


def test_importing_the_sdk_imports_no_django():
    code = (
        "import sys; import conveyor.sdk, conveyor.sdk.protocol, conveyor.sdk.worker, conveyor.sdk.client; "
        "print('django' in sys.modules)"
    )
    env = {k: v for k, v in base_env().items() if k != "DJANGO_SETTINGS_MODULE"}

    out = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(ROOT), env=env, capture_output=True, text=True, timeout=60
    )

    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
