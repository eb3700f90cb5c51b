"""A worker turned away by a node that is shutting down keeps reconnecting.

Such a node closes new connections before it answers their HTTP upgrade,
or accepts them and refuses the session with 1012 ("go elsewhere",
docs/protocol.md §13); a worker reconnecting at that moment (after the
node's 1012 close, or to a node behind a load balancer that is being
replaced) must try again with backoff, as it does when the connection is
refused. Only the refusals for good (4400, 4401, 4403, 4406) end ``run()``.
"""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.server import ServerConnection, serve

from conveyor.sdk import AsyncWorker
from conveyor.sdk.errors import WorkerRefused


async def serve_closing_every_connection(seen: asyncio.Queue[None]) -> asyncio.Server:
    """A TCP server that reads each request and closes without an answer."""

    async def cut_off(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        seen.put_nowait(None)

    return await asyncio.start_server(cut_off, "127.0.0.1", 0)


def test_a_handshake_closed_without_an_answer_is_tried_again() -> None:
    async def scenario() -> None:
        seen: asyncio.Queue[None] = asyncio.Queue()
        server = await serve_closing_every_connection(seen)
        port = server.sockets[0].getsockname()[1]
        worker = AsyncWorker(f"http://127.0.0.1:{port}", concurrency=1)
        running = asyncio.create_task(worker.run())
        for _ in range(3):  # the first handshake, and two more after it was cut off
            heard = asyncio.ensure_future(seen.get())
            await asyncio.wait({heard, running}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
            assert not running.done(), f"the worker gave up: {running.exception()!r}"
            assert heard.done()
        await worker.stop()
        await asyncio.wait_for(running, 30)  # returns, raises nothing
        server.close()

    asyncio.run(scenario())


def test_a_session_refused_for_now_is_tried_again_and_one_refused_for_good_is_not() -> None:
    """A node that is stopping answers hello with an error frame and 1012 (try
    elsewhere); 4401 (unauthenticated) ends ``run()`` with ``WorkerRefused``."""

    async def scenario(close_code: int) -> tuple[int, BaseException | None]:
        sessions = 0
        heard: asyncio.Queue[None] = asyncio.Queue()

        async def refuse(ws: ServerConnection) -> None:
            nonlocal sessions
            sessions += 1
            await ws.send(json.dumps({"type": "error", "code": "unavailable", "message": "not serving workers"}))
            await ws.recv()  # the hello
            await ws.close(close_code)
            heard.put_nowait(None)

        async with serve(refuse, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            worker = AsyncWorker(f"http://127.0.0.1:{port}", concurrency=1)
            running = asyncio.create_task(worker.run())
            for _ in range(3):
                waiting = asyncio.ensure_future(heard.get())
                await asyncio.wait({waiting, running}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
                if running.done():
                    waiting.cancel()
                    break
            await worker.stop()
            await asyncio.wait({running}, timeout=30)
            return sessions, running.exception()

    sessions, error = asyncio.run(scenario(1012))
    assert error is None and sessions >= 3
    sessions, error = asyncio.run(scenario(4401))
    assert isinstance(error, WorkerRefused) and error.code == 4401 and sessions == 1
