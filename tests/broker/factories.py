"""Small factories shared by the broker conformance tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from conveyor.broker import Broker, TaskSpec
from conveyor.models import Task


def enqueue(broker: Broker, type: str = "test:task", **fields: Any) -> Task:
    """Enqueue one task built from keyword fields of ``TaskSpec``."""
    return broker.enqueue(TaskSpec(type=type, **fields))


def lease_one(broker: Broker, queue: str = "default") -> Task:
    """Lease exactly one task of *queue*; fail the test when none is due."""
    batch = broker.lease(queue, 1)
    assert len(batch.tasks) == 1, f"expected one leasable task in {queue!r}, got {batch}"
    return batch.tasks[0]


def reload(broker: Broker, task_id: str) -> Task:
    return broker.get_task(task_id)


def snapshot(broker: Broker, task_id: str) -> dict[str, Any]:
    """Every stored column of one task, comparable across reads (bytes, not memoryview)."""
    row = broker.get_task(task_id)
    values = {}
    for f in Task._meta.concrete_fields:
        value = getattr(row, f.attname)
        values[f.attname] = bytes(value) if isinstance(value, memoryview) else value
    return values


def all_snapshots(broker: Broker) -> dict[str, dict[str, Any]]:
    return {tid: snapshot(broker, tid) for tid in broker.tasks.values_list("id", flat=True)}


def on_loop(leaser: Any, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``work(leaser)`` (a node's ``LoopLeaser``) on an event loop of its own; close the leaser's connections after."""

    async def go() -> Any:
        try:
            return await work(leaser)
        finally:
            await leaser.close()

    return asyncio.run(go())
