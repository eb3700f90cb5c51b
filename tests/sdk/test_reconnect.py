"""A worker whose handshake is cut off keeps reconnecting.

A node that is shutting down closes new connections before it answers
their HTTP upgrade; a worker reconnecting at that moment (after the node's
1012 close, or to a node behind a load balancer that is being replaced)
must try again with backoff, as it does when the connection is refused.
"""

from __future__ import annotations

import asyncio

from conveyor.sdk import AsyncWorker


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
