"""The refill rule (docs/protocol.md §7, item 3), on a real dev node with a raw WebSocket worker.

A worker with a prefetch window that still holds more than its concurrency
is topped up once its free credit reaches half its window, in one lease; a
worker without a window gets each slot back filled at once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from conveyor.sdk import protocol as p
from tests.e2e.conftest import dev_node
from tests.e2e.support import NodeProcess
from tests.integration.test_worker_protocol import Raw, run, worker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    # No reaper pass during a test: its wake would lease whatever credit is free.
    yield from dev_node(tmp_path_factory, "refill", CONVEYOR_REAPER_INTERVAL="1h")


@pytest.fixture
def queue() -> str:
    return f"rf-{uuid.uuid4().hex[:10]}"


async def dispatches(w: Raw) -> list[str]:
    """The task ids of the next WebSocket message that carries dispatches (one push: one lease)."""
    while True:
        data = json.loads(await w.ws.recv())
        frames = data if isinstance(data, list) else [data]
        ids = [f["task_id"] for f in frames if f["type"] == p.DISPATCH]
        if ids:
            return ids
        assert all(f["type"] == p.PING for f in frames), frames


async def answer(w: Raw, task_id: str) -> None:
    """A success for *task_id*, and wait until the node has acked it (so what it did next is done)."""
    await w.send({"type": "result", "task_id": task_id, "outcome": "success"})
    for _ in range(600):
        if (await w.task(task_id))["state"] == "completed":
            return
    raise AssertionError(f"{task_id} was not acked")


def test_a_worker_with_work_waiting_in_its_window_is_topped_up_at_half_the_window(node, queue):
    async def scenario() -> tuple[list[str], list[str], set[str], list[str]]:
        async with worker(node) as w:
            ids = [(await w.enqueue(queue=queue))["id"] for _ in range(20)]
            await w.hello({queue: 1}, concurrency=1, prefetch=8)
            held: list[str] = []
            while len(held) < 9:  # concurrency + window
                held += await dispatches(w)
            for task_id in held[:4]:  # one running, the rest still waiting in the window
                await answer(w, task_id)
            topped = await dispatches(w)  # the first push after those results
            done, rest = set(held[:4]), held[4:] + topped
            while len(done) < len(ids):  # everything else runs too: no credit is left unused
                if not rest:
                    rest += await dispatches(w)
                task_id = rest.pop(0)
                await answer(w, task_id)
                done.add(task_id)
            return ids, held, done, topped

    ids, held, done, topped = run(scenario())

    assert len(held) == 9
    assert len(topped) == 4  # one lease for half the window, not one per result
    assert done == set(ids)


def test_a_worker_without_a_window_gets_each_slot_refilled_at_once(node, queue):
    async def scenario() -> tuple[list[str], list[str]]:
        async with worker(node) as w:
            for _ in range(6):
                await w.enqueue(queue=queue)
            await w.hello({queue: 1}, concurrency=2)
            held: list[str] = []
            while len(held) < 2:
                held += await dispatches(w)
            await answer(w, held[0])
            return held, await dispatches(w)

    held, refill = run(scenario())

    assert len(held) == 2
    assert len(refill) == 1


def test_a_starved_worker_with_a_window_is_leased_for_at_once(node, queue):
    """Work enqueued while the worker holds nothing reaches it at once, whatever its window."""

    async def scenario() -> list[str]:
        async with worker(node) as w:
            await w.hello({queue: 1}, concurrency=2, prefetch=16)
            task = await w.enqueue(queue=queue)
            got = await dispatches(w)
            await answer(w, got[0])
            return [task["id"], *got]

    task_id, *got = run(scenario())

    assert got == [task_id]
