"""Started on delivery (docs/protocol.md §5.1 `started`, §6.6), on a real dev node.

On a session with a prefetch window, a dispatch that the worker's
concurrency has room for, counting every delivery the session holds
(a batch as one), is marked ``"started": true`` and counted started at
once; the rest wait in the window until the worker says `started`. Raw
``websockets`` workers pin the node's marks; an SDK worker, watched on the
wire through a relay, runs a marked dispatch without writing `started`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.server import ServerConnection, serve

from conveyor.sdk import AsyncWorker
from conveyor.sdk import protocol as p
from tests.e2e.conftest import dev_node
from tests.e2e.support import NodeProcess
from tests.integration.test_worker_protocol import Raw, run, worker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    yield from dev_node(tmp_path_factory, "ondelivery")


@pytest.fixture
def queue() -> str:
    return f"od-{uuid.uuid4().hex[:10]}"


async def deliveries(w: Raw, n: int) -> list[dict[str, Any]]:
    """The next *n* dispatch and batch_dispatch frames, in the order they came."""
    got: list[dict[str, Any]] = []
    while len(got) < n:
        frame = await w.frame()
        assert frame["type"] in (p.DISPATCH, p.BATCH_DISPATCH), frame
        got.append(frame)
    return got


def marks(frames: list[dict[str, Any]]) -> list[bool]:
    return [frame.get("started", False) for frame in frames]


def test_an_idle_windowed_workers_dispatch_is_marked_started(node, queue):
    async def scenario() -> dict[str, Any]:
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=2, prefetch=16)
            await w.enqueue(queue=queue)
            return (await deliveries(w, 1))[0]

    frame = run(scenario())

    assert frame["started"] is True


def test_dispatches_beyond_the_concurrency_are_not_marked(node, queue):
    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with worker(node) as w:
            for _ in range(5):
                await w.enqueue(queue=queue)
            await w.hello({queue: 1}, concurrency=2, prefetch=2)
            held = await deliveries(w, 4)
            # One result frees a slot for a waiting one (told by `started`);
            # the dispatch that refills the window waits again.
            await w.send(
                {"type": p.STARTED, "task_ids": [held[2]["task_id"]]},
                {"type": p.RESULT, "task_id": held[0]["task_id"], "outcome": p.SUCCESS},
            )
            return held, (await deliveries(w, 1))[0]

    held, refill = run(scenario())

    assert marks(held) == [True, True, False, False]
    assert "started" not in refill


def test_deliveries_of_every_queue_count_against_the_concurrency(node, queue):
    a, b = f"{queue}-a", f"{queue}-b"

    async def scenario() -> list[dict[str, Any]]:
        async with worker(node) as w:
            for q in (a, b, a, b):
                await w.enqueue(queue=q)
            await w.hello({a: 1, b: 1}, concurrency=2, prefetch=2)  # credit: 2 per queue
            return await deliveries(w, 4)

    held = run(scenario())

    assert sorted(f["queue"] for f in held) == [a, a, b, b]
    assert marks(held) == [True, True, False, False]


def test_a_batch_counts_as_one_delivery(node, queue):
    async def scenario() -> list[dict[str, Any]]:
        async with worker(node) as w:
            config = {"queue": queue, "group": "g", "max_size": 3, "max_delay": "1m", "grace": "1m"}
            assert (await w.http.put("/api/v1/groups", json=config)).status_code in (200, 204)
            await w.hello({queue: 1}, concurrency=2, prefetch=2, batch_types=["bt"])
            for _ in range(3):
                await w.enqueue(queue=queue, type="bt", group="g")
            batch = await deliveries(w, 1)
            for _ in range(2):
                await w.enqueue(queue=queue)
            return batch + await deliveries(w, 2)

    held = run(scenario())

    assert [f["type"] for f in held] == [p.BATCH_DISPATCH, p.DISPATCH, p.DISPATCH]
    assert len(held[0]["tasks"]) == 3
    assert marks(held) == [True, True, False]  # the batch and one single fill 2 slots


def test_a_session_without_a_window_gets_no_mark(node, queue):
    async def scenario() -> dict[str, Any]:
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=2)
            await w.enqueue(queue=queue)
            return (await deliveries(w, 1))[0]

    frame = run(scenario())

    assert "started" not in frame


def test_a_started_frame_for_a_marked_dispatch_changes_nothing(node, queue):
    """A worker that does not know the mark says `started` as before: the task runs and completes."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=1, prefetch=1)
            first = (await w.enqueue(queue=queue))["id"]
            got = (await deliveries(w, 1))[0]
            await w.send(
                {"type": p.STARTED, "task_ids": [first]},
                {"type": p.RESULT, "task_id": first, "lease_id": got["lease_id"], "outcome": p.SUCCESS},
            )
            done = await w.task_until(first, lambda t: t["state"] == "completed", "completed")
            await w.enqueue(queue=queue)
            return got, done, (await deliveries(w, 1))[0]

    got, done, after = run(scenario())

    assert got["started"] is True
    assert done["state"] == "completed"
    assert after["started"] is True  # the session goes on, its slot free again


# -- the SDK, watched on the wire --------------------------------------------------------------


@asynccontextmanager
async def relay(node: NodeProcess, seen: list[tuple[str, dict[str, Any]]]) -> AsyncIterator[str]:
    """A WebSocket relay to the node that records every frame, ("S", frame)
    from the node and ("W", frame) from the worker; yields its base URL."""
    upstream = node.url.replace("http://", "ws://") + p.WORKER_PATH

    async def pipe(src: Any, dst: Any, side: str) -> None:
        async for message in src:
            seen.extend((side, frame) for frame in p.decode_frames(message))
            await dst.send(message)

    async def handler(ws: ServerConnection) -> None:
        async with websockets.connect(upstream) as node_ws:
            legs = {asyncio.create_task(pipe(ws, node_ws, "W")), asyncio.create_task(pipe(node_ws, ws, "S"))}
            _, pending = await asyncio.wait(legs, return_when=asyncio.FIRST_COMPLETED)
            for leg in pending:
                leg.cancel()

    async with serve(handler, "127.0.0.1", 0) as server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_an_sdk_worker_runs_a_marked_dispatch_without_a_started_frame(node, queue):
    """Concurrency 1, window 2, three tasks: the first is marked and runs at
    once; the other two wait, and each is announced by `started` as it starts."""

    async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], list[str], list[str]]:
        seen: list[tuple[str, dict[str, Any]]] = []
        gate, order = asyncio.Event(), []
        async with relay(node, seen) as url, httpx.AsyncClient(base_url=node.url, timeout=30) as http:
            sdk = AsyncWorker(url, queues={queue: 1}, concurrency=1, prefetch=2, drain_timeout=5)

            @sdk.task("od")
            async def handle(task: Any) -> None:
                order.append(task.id)
                await gate.wait()

            serving = asyncio.create_task(sdk.run())
            try:
                await asyncio.wait_for(sdk.connected.wait(), 20)
                ids = []
                for _ in range(3):
                    response = await http.post("/api/v1/tasks", json={"type": "od", "queue": queue, "json": {}})
                    ids.append(response.json()["id"])
                async with asyncio.timeout(20):
                    while sum(kind == "S" and f["type"] == p.DISPATCH for kind, f in seen) < 3:
                        await asyncio.sleep(0.01)
                    gate.set()
                    while sdk.completed < 3:
                        await asyncio.sleep(0.01)
            finally:
                await sdk.stop()
                await asyncio.wait({serving}, timeout=10)
        return seen, ids, order

    seen, ids, order = run(scenario())

    dispatched = [f for kind, f in seen if kind == "S" and f["type"] == p.DISPATCH]
    announced = [i for kind, f in seen if kind == "W" and f["type"] == p.STARTED for i in f["task_ids"]]
    assert [f["task_id"] for f in dispatched] == ids
    assert marks(dispatched) == [True, False, False]
    assert announced == ids[1:]  # never the marked one
    assert order == ids
