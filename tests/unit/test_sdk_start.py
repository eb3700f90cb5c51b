"""A dispatched task's handler starts while its frame is being read, not a loop turn later."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from conveyor.sdk import AsyncWorker, Task
from conveyor.sdk import protocol as p


def dispatch(task_id: str, payload: Any) -> dict[str, Any]:
    return {
        "type": p.DISPATCH,
        "task_id": task_id,
        "task_type": "noop",
        "queue": "default",
        "lease_id": f"lease-{task_id}",
        "payload": base64.b64encode(json.dumps(payload).encode()).decode(),
        "content_type": "application/json",
        "attempt": 1,
        "max_retry": 3,
    }


def test_an_async_handler_runs_to_its_first_await_before_the_next_frame_is_read() -> None:
    worker = AsyncWorker("http://127.0.0.1:1", concurrency=4)
    seen: list[str] = []

    @worker.task("noop")
    async def noop(task: Task) -> dict[str, Any]:
        seen.append(f"start {task.id}")
        await asyncio.sleep(0)
        seen.append(f"end {task.id}")
        return {"n": task.payload["n"]}

    async def scenario() -> None:
        worker._on_frame(dispatch("a", {"n": 1}))
        seen.append("after frame a")
        worker._on_frame(dispatch("b", {"n": 2}))
        seen.append("after frame b")
        await asyncio.gather(*(r.future for r in worker._running.values() if r.future is not None))

    asyncio.run(scenario())
    assert seen == ["start a", "after frame a", "start b", "after frame b", "end a", "end b"]
    assert worker.completed == 2 and worker._running == {}


def test_a_handler_that_never_waits_has_its_result_ready_when_the_frame_is_read() -> None:
    worker = AsyncWorker("http://127.0.0.1:1", concurrency=1)

    @worker.task("noop")
    async def noop(task: Task) -> None:
        raise ValueError("bad payload")

    async def scenario() -> list[dict[str, Any]]:
        worker._on_frame(dispatch("a", {}))
        return list(worker._outbox)  # before the loop has turned once

    sent = asyncio.run(scenario())
    assert [(f["task_id"], f["outcome"]) for f in sent] == [("a", p.RETRY)]
    assert "bad payload" in sent[0]["error"]
    assert worker._running == {}


def test_an_installed_task_factory_sees_every_handler_task() -> None:
    worker = AsyncWorker("http://127.0.0.1:1", concurrency=1)
    made: list[str] = []

    @worker.task("noop")
    async def noop(task: Task) -> None:
        return None

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def scenario() -> None:
        asyncio.get_running_loop().set_task_factory(factory)
        worker._on_frame(dispatch("a", {}))
        await asyncio.gather(*(r.future for r in worker._running.values() if r.future is not None))

    asyncio.run(scenario())
    assert "AsyncWorker._execute" in made  # a tracing library hooked in this way sees the handler
    assert worker.completed == 1
