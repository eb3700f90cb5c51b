"""Small factories shared by the broker conformance tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from django.db import connections

from conveyor.broker import Broker, TaskSpec
from conveyor.dispatch.loop_lease import APPLICATION_NAME
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


def own_sessions(alias: str, *, gone_within: float = 0.0) -> list[int]:
    """Server pids of the node's own connections (``conveyor-lease``) to *alias*'s
    database, as pg_stat_activity shows them; with *gone_within*, first wait up
    to that long for none to be left (a closed session's backend ends a moment
    after its client)."""
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    deadline = time.monotonic() + gone_within
    with psycopg.connect(**params, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
                [APPLICATION_NAME],
            ).fetchall()
            if not rows or time.monotonic() >= deadline:
                return [pid for (pid,) in rows]
            time.sleep(0.02)
