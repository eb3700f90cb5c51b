"""One-INSERT enqueues from an event loop (a node's fast path), against real PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conveyor.api import render
from conveyor.broker import TaskSpec
from conveyor.broker.types import Dependency
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.exceptions import InvalidArgument
from conveyor.models import Task

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


def _enqueue_on_loop(broker, spec: TaskSpec):
    leaser = LoopLeaser(broker)

    async def go():
        try:
            return await leaser.enqueue(spec)
        finally:
            await leaser.close()

    return asyncio.run(go())


def _shown(task: Task) -> dict[str, Any]:
    return {k: v for k, v in render.task(task).items() if k != "id"}


SPEC = {
    "type": "email:send",
    "payload": b'{"to": "a@b.c"}',
    "queue": "email",
    "priority": 7,
    "max_retry": 3,
    "expires_in": 600,
    "timeout": 30,
    "retention": 3600,
    "concurrency_key": "k1",
    "metadata": {"trace": "t1"},
}


def test_stores_what_the_broker_stores_for_the_same_task(broker, hooks):
    through_loop = _enqueue_on_loop(broker, TaskSpec(**SPEC))
    through_thread = broker.enqueue_one(TaskSpec(**SPEC))

    assert through_loop.created and through_loop.error is None
    stored_loop = broker.get_task(through_loop.task.id)
    stored_thread = broker.get_task(through_thread.task.id)
    assert _shown(stored_loop) == _shown(stored_thread)
    assert _shown(through_loop.task) == _shown(stored_loop)  # the answer is what was stored


def test_a_due_task_wakes_its_queue_and_is_announced_once_stored(broker, hooks):
    result = _enqueue_on_loop(broker, TaskSpec(type="t", queue="email"))

    assert hooks.woken() == {"email"}
    assert [(e.kind, e.task_id) for e in hooks.events] == [("enqueued", result.task.id)]


def test_a_delayed_task_is_scheduled_without_a_wake(broker, hooks):
    result = _enqueue_on_loop(broker, TaskSpec(type="t", queue="email", process_in=60))

    assert broker.get_task(result.task.id).state == "scheduled"
    assert hooks.woken() == set()
    assert [e.kind for e in hooks.events] == ["scheduled"]


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "mine-1"},
        {"unique_key": "u"},
        {"unique": True},
        {"group": "g"},
        {"depends_on": [Dependency(task_id="01KX3CAWA7WMGN3R5EA7JJCFA0")]},
    ],
    ids=["own id", "unique key", "unique payload", "group", "dependencies"],
)
def test_tasks_that_need_more_than_one_insert_are_left_to_a_database_thread(broker, hooks, fields):
    assert _enqueue_on_loop(broker, TaskSpec(type="t", **fields)) is None
    assert broker.tasks.count() == 0
    assert hooks.events == []


def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(broker):
    with pytest.raises(InvalidArgument) as refused:
        _enqueue_on_loop(broker, TaskSpec(type="t", priority=99))
    assert refused.value.field == "priority"
    assert broker.tasks.count() == 0


def test_repeating_the_insert_of_a_stored_task_stores_it_once(broker):
    task = broker.one_insert_task(TaskSpec(type="t"))
    leaser = LoopLeaser(broker)

    async def twice():
        try:
            first = await leaser.run(lambda conn: broker.insert_on(conn, task))
            second = await leaser.run(lambda conn: broker.insert_on(conn, task))
            return first, second
        finally:
            await leaser.close()

    assert asyncio.run(twice()) == (True, False)
    assert broker.tasks.filter(id=task.id).count() == 1
