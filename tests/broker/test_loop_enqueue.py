"""One-INSERT enqueues from an event loop (a node's fast path), against real PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import psycopg
import pytest
from django.db import connections
from django.test import override_settings

from conveyor.api import render
from conveyor.broker import TaskSpec
from conveyor.broker.types import Dependency
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.exceptions import InvalidArgument
from conveyor.models import Task
from tests.broker.factories import enqueue, on_loop, own_sessions

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


def _enqueue_on_loop(broker, spec: TaskSpec):
    return on_loop(LoopLeaser(broker), lambda leaser: leaser.enqueue(spec))


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


@pytest.mark.parametrize("prepared", [True, False])
def test_stores_the_same_with_prepared_statements_on_and_off(broker, hooks, prepared):
    # On: one prepared statement per pattern of parameter types, prepared on
    # the leaser's connection once and reused; off: nothing prepared.
    with override_settings(CONVEYOR={"PREPARED_STATEMENTS": prepared}):
        leaser = LoopLeaser(broker)

        async def three(leaser: LoopLeaser) -> tuple[list[Any], list[str]]:
            stored = [await leaser.enqueue(TaskSpec(**SPEC)) for _ in range(3)]
            names = await leaser.run(lambda conn: _prepared_names(conn))
            return stored, names

        stored, names = on_loop(leaser, three)
    assert [broker.get_task(r.task.id).state for r in stored] == ["pending"] * 3
    assert _shown(stored[0].task) == _shown(broker.get_task(stored[0].task.id))
    # At most two: the INSERT that looks for an offer, and the plain one its
    # queue's enqueues use while the pause after a miss lasts (psycopg's names).
    assert len([n for n in names if n.startswith("_pg3_")]) == (2 if prepared else 0)


def test_the_loops_insert_survives_its_prepared_statement_being_dropped(broker, hooks):
    leaser = LoopLeaser(broker)

    async def around_a_deallocate(leaser: LoopLeaser) -> list[Any]:
        first = await leaser.enqueue(TaskSpec(**SPEC))
        await leaser.run(lambda conn: conn.execute("DEALLOCATE ALL"))  # as psycopg does after a ROLLBACK
        second = await leaser.enqueue(TaskSpec(**SPEC))  # psycopg prepares it again
        return [first, second]

    stored = on_loop(leaser, around_a_deallocate)
    assert [broker.get_task(r.task.id).state for r in stored] == ["pending"] * 2
    assert Task.objects.using(broker.db).filter(type=SPEC["type"]).count() == 2


async def _prepared_names(conn: Any) -> list[str]:
    cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
    return [name for (name,) in await cursor.fetchall()]


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


def _terminate(database: str, pids: list[int]) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])


ADMIN_URL = "host=127.0.0.1 user=postgres dbname=postgres"


def test_after_the_server_ends_every_pooled_connection_an_enqueue_still_succeeds_once(broker, hooks, db_alias):
    database = connections[db_alias].settings_dict["NAME"]
    for q in ("a", "b"):
        enqueue(broker, queue=q)
    leaser = LoopLeaser(broker, 3)

    async def go():
        try:
            both = asyncio.Barrier(2)

            async def lease_with_another(conn, queue):  # two connections at once
                await asyncio.wait_for(both.wait(), 5)
                return await broker.lease_on(conn, queue, 1, "h")

            await asyncio.gather(*(leaser.run(lambda conn, q=q: lease_with_another(conn, q)) for q in ("a", "b")))
            pids = own_sessions(db_alias)  # both idle now
            await asyncio.to_thread(_terminate, database, pids)
            await asyncio.sleep(0.2)
            return len(pids), await leaser.enqueue(TaskSpec(type="t", queue="c"))
        finally:
            await leaser.close()

    idle, result = asyncio.run(go())
    assert idle == 2
    assert result.created
    assert broker.tasks.filter(queue="c").count() == 1
    assert hooks.woken() >= {"c"}


def test_an_enqueue_on_a_connection_lost_without_a_word_from_the_server_succeeds_once(broker, hooks):
    # The socket closes under an idle pooled connection with no error from
    # the server to read (psycopg: "server closed the connection
    # unexpectedly", no SQLSTATE): the INSERT is tried again on a new one.
    leaser = LoopLeaser(broker)

    async def go():
        try:
            await leaser.enqueue(TaskSpec(type="warm", queue="q"))  # one idle connection now
            idle = await leaser.run(_fileno)  # (the pool's one)
            with socket.socket(fileno=os.dup(idle)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
            return await leaser.enqueue(TaskSpec(type="t", queue="c"))
        finally:
            await leaser.close()

    result = asyncio.run(go())
    assert result.created
    assert broker.tasks.filter(queue="c").count() == 1
    assert hooks.woken() >= {"c"}


async def _fileno(conn: Any) -> int:
    return conn.fileno()


def test_enqueues_leave_a_connection_for_the_leases(broker):
    async def work(leaser):
        await asyncio.gather(*(leaser.enqueue(TaskSpec(type="t", queue="q")) for _ in range(6)))
        return len(own_sessions(broker.db))

    assert on_loop(LoopLeaser(broker, 2), work) == 1  # six at once went through one connection of the two
    assert broker.tasks.filter(queue="q").count() == 6


def test_an_enqueue_abandoned_while_its_insert_runs_is_stored_and_announced(broker, hooks):
    leaser = LoopLeaser(broker)

    async def go():
        try:
            await leaser.enqueue(TaskSpec(type="warm", queue="q"))  # the connection is open
            request = asyncio.ensure_future(leaser.enqueue(TaskSpec(type="abandoned", queue="q")))
            await asyncio.sleep(0)  # the INSERT is on its way
            request.cancel()
            for _ in range(100):
                if any(e.kind == "enqueued" and e.type == "abandoned" for e in hooks.events):
                    break
                await asyncio.sleep(0.02)
        finally:
            await leaser.close()

    asyncio.run(go())
    stored = broker.tasks.filter(type="abandoned")
    assert stored.count() == 1
    assert [e.task_id for e in hooks.events if e.type == "abandoned"] == [stored.get().id]
