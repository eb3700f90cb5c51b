"""A worker with a prefetch window writes one message per turn of its loop.

What leaves the worker is watched on the wire, from a scripted server (the
node shows no message counts): deliveries that arrive together are taken
out of the window with one `started` frame, and handlers that finish
together send their results and the next `started` in one message. Each
message costs the node a read, a decode and a turn of its loop, so one per
task at 50 slots was most of the node's CPU per task.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from conveyor.sdk import AsyncWorker


def dispatch(n: int) -> dict[str, Any]:
    return {
        "type": "dispatch",
        "task_id": f"T{n}",
        "lease_id": f"L{n}",
        "queue": "default",
        "task_type": "wait",
        "payload": base64.b64encode(b"{}").decode(),
        "content_type": "application/json",
        "attempt": 1,
        "max_retry": 3,
    }


def frames_of(message: str) -> list[dict[str, Any]]:
    decoded = json.loads(message)
    return decoded if isinstance(decoded, list) else [decoded]


def test_deliveries_and_results_of_one_loop_turn_leave_in_one_message() -> None:
    async def scenario() -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
        release = asyncio.Event()
        messages: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()

        async def script(ws: ServerConnection) -> None:
            await ws.recv()  # hello
            welcome = {"type": "welcome", "session_id": "S1", "heartbeat_interval": 60, "prefetch": 2}
            await ws.send(json.dumps(welcome))
            await ws.send(json.dumps([dispatch(n) for n in range(4)]))  # 2 to run, 2 to hold
            async for message in ws:
                frames = [f for f in frames_of(message) if f.get("type") != "heartbeat"]
                if frames:
                    messages.put_nowait(frames)

        async def quiet(seconds: float) -> list[list[dict[str, Any]]]:
            """The messages the worker writes until it has been silent for *seconds*."""
            seen = []
            while True:
                try:
                    seen.append(await asyncio.wait_for(messages.get(), seconds))
                except TimeoutError:
                    return seen

        async with serve(script, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            worker = AsyncWorker(f"http://127.0.0.1:{port}", concurrency=2, prefetch=2, drain_timeout=1)

            @worker.task("wait")
            async def wait(task: Any) -> None:
                await release.wait()

            running = asyncio.create_task(worker.run())
            try:
                arrived = await quiet(0.5)
                release.set()  # both running handlers finish in one turn of the loop
                finished = await quiet(0.5)
            finally:
                await worker.stop()
                await asyncio.wait({running}, timeout=10)
            return arrived, finished

    arrived, finished = asyncio.run(scenario())

    # Four dispatches in one message: the two that may run start under one frame.
    assert arrived == [[{"type": "started", "task_ids": ["T0", "T1"]}]], arrived
    # Their results and the start of the two held ones: one message.
    first = finished[0]
    assert sorted((f["type"], f.get("task_id")) for f in first if f["type"] == "result") == [
        ("result", "T0"),
        ("result", "T1"),
    ], finished
    assert [f for f in first if f["type"] == "started"] == [{"type": "started", "task_ids": ["T2", "T3"]}], finished


def test_a_marked_dispatch_starts_after_those_that_arrived_before_it_and_without_a_started_frame() -> None:
    """A dispatch marked started (docs/protocol.md §6.6) that arrives behind
    a waiting one in the same message: the waiting one starts first, under
    a `started` frame that does not name the marked one."""

    async def scenario() -> tuple[list[str], list[list[dict[str, Any]]]]:
        order: list[str] = []
        messages: list[list[dict[str, Any]]] = []

        async def script(ws: ServerConnection) -> None:
            await ws.recv()  # hello
            welcome = {"type": "welcome", "session_id": "S1", "heartbeat_interval": 60, "prefetch": 2}
            await ws.send(json.dumps(welcome))
            await ws.send(json.dumps([dispatch(0), {**dispatch(1), "started": True}]))
            async for message in ws:
                messages.append([f for f in frames_of(message) if f.get("type") != "heartbeat"])

        async with serve(script, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            worker = AsyncWorker(f"http://127.0.0.1:{port}", concurrency=2, prefetch=2, drain_timeout=1)

            @worker.task("wait")
            async def wait(task: Any) -> None:
                order.append(task.id)

            running = asyncio.create_task(worker.run())
            try:
                async with asyncio.timeout(10):
                    while worker.completed < 2:
                        await asyncio.sleep(0.01)
            finally:
                await worker.stop()
                await asyncio.wait({running}, timeout=10)
        return order, messages

    order, messages = asyncio.run(scenario())

    assert order == ["T0", "T1"]
    started = [f for m in messages for f in m if f["type"] == "started"]
    assert started == [{"type": "started", "task_ids": ["T0"]}], messages
