"""An enqueue wakes the nodes once its task is visible, and returns once it is durable.

Real PostgreSQL. What each test checks is read from the server by another
session at the moment the wake is sent: whether the task is visible, the
last statement the enqueuing session ran, and how far the WAL was written;
then, once the enqueue has returned, how far it is flushed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction
from django.test import override_settings

from conveyor.broker import Broker, TaskSpec
from conveyor.broker.hooks import RecordingHooks
from conveyor.dispatch.loop_lease import LoopLeaser
from tests.broker.factories import on_loop

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


@dataclass
class Seen:
    visible: int  # tasks another session could read
    last_statement: str  # what the enqueuing session ran last


class Watching(RecordingHooks):
    """Hooks that, at each wake, look at the server from a session of their own."""

    def __init__(self, alias: str) -> None:
        super().__init__()
        self.alias = alias
        self.seen: list[Seen] = []
        self.enqueuing_pid: int | None = None  # None: the node's leaser connection

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        super().wake(queues, at)
        with observer(self.alias) as conn:
            visible = conn.execute("SELECT count(*) FROM conveyor_task").fetchone()[0]
            if self.enqueuing_pid is None:
                where, params = "application_name = 'conveyor-lease' AND datname = current_database()", []
            else:
                where, params = "pid = %s", [self.enqueuing_pid]
            rows = conn.execute(f"SELECT query FROM pg_stat_activity WHERE {where}", params).fetchall()
        self.seen.append(Seen(visible, " | ".join(r[0] for r in rows)))


def observer(alias: str) -> psycopg.Connection[Any]:
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def woken_before_the_flush(seen: Seen) -> bool:
    """The enqueuing session's last statement was the INSERT that commits
    without the flush, or the statement that waits for it (sent just before
    the wake, its answer read after)."""
    return (
        "set_config('synchronous_commit', 'off', true)" in seen.last_statement
        or "pg_logical_emit_message" in seen.last_statement
    )


def wal_position(alias: str) -> str:
    with observer(alias) as conn:
        return conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]


def commit_flushed(alias: str, since: str, task_id: str) -> bool:
    """Is the commit record of the transaction that inserted *task_id* among
    the WAL records flushed to disk (read with pg_walinspect)?"""
    with observer(alias) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.errors.UndefinedFile:
            pytest.skip("pg_walinspect is not installed")
        xid = conn.execute("SELECT xmin::text FROM conveyor_task WHERE id = %s", [task_id]).fetchone()[0]
        return (
            conn.execute(
                "SELECT count(*) FROM pg_get_wal_records_info(%s::pg_lsn, pg_current_wal_flush_lsn()) "
                "WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT' AND xid::text = %s",
                [since, xid],
            ).fetchone()[0]
            == 1
        )


def test_a_due_task_wakes_the_nodes_once_visible_and_before_its_flush(db_alias, clock):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    connections[db_alias].ensure_connection()
    hooks.enqueuing_pid = connections[db_alias].connection.info.backend_pid

    since = wal_position(db_alias)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert hooks.woken() == {"email"}
    [seen] = hooks.seen
    assert seen.visible == 1
    # Woken after the INSERT that commits without waiting for the flush...
    assert woken_before_the_flush(seen)
    # ...and the enqueue returned only once that commit was on disk.
    assert commit_flushed(db_alias, since, task.id)
    assert [(e.kind, e.task_id) for e in hooks.events] == [("enqueued", task.id)]


def test_the_enqueue_leaves_the_session_committing_durably(broker, db_alias):
    broker.enqueue(TaskSpec(type="t"))

    with connections[db_alias].cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "on"


def test_in_a_callers_transaction_the_wake_waits_for_its_commit(db_alias, clock):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    with transaction.atomic(using=db_alias):
        broker.enqueue(TaskSpec(type="t", queue="email"))
        with connections[db_alias].cursor() as cursor:
            cursor.execute("SELECT current_setting('synchronous_commit')")
            setting = cursor.fetchone()[0]
        assert hooks.wakes == []

    assert setting == "on"  # the caller's transaction commits durably
    assert hooks.woken() == {"email"}
    assert hooks.seen[0].visible == 1


@pytest.mark.parametrize(
    "fields", [{"process_in": 60}, {"id": "mine-1"}, {"unique_key": "u"}], ids=["scheduled", "own id", "unique key"]
)
def test_other_tasks_commit_durably_before_anything_is_announced(db_alias, clock, fields):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    connections[db_alias].ensure_connection()
    hooks.enqueuing_pid = connections[db_alias].connection.info.backend_pid

    broker.enqueue(TaskSpec(type="t", queue="email", **fields))

    for seen in hooks.seen:
        assert not woken_before_the_flush(seen)
    assert len(hooks.events) == 1


@override_settings(CONVEYOR={"ENQUEUE_WAKE_BEFORE_FLUSH": False})
def test_the_setting_turns_it_off(db_alias, clock):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    connections[db_alias].ensure_connection()
    hooks.enqueuing_pid = connections[db_alias].connection.info.backend_pid

    broker.enqueue(TaskSpec(type="t", queue="email"))

    [seen] = hooks.seen
    assert seen.visible == 1
    assert not woken_before_the_flush(seen)


def test_on_a_nodes_loop_too(db_alias, clock):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    since = wal_position(db_alias)

    result = on_loop(LoopLeaser(broker), lambda leaser: leaser.enqueue(TaskSpec(type="t", queue="email")))

    assert result.created
    [seen] = hooks.seen
    assert seen.visible == 1
    assert woken_before_the_flush(seen)
    assert commit_flushed(db_alias, since, result.task.id)
    assert [(e.kind, e.task_id) for e in hooks.events] == [("enqueued", result.task.id)]


@override_settings(CONVEYOR={"ENQUEUE_WAKE_BEFORE_FLUSH": False})
def test_on_a_nodes_loop_the_setting_turns_it_off(db_alias, clock):
    hooks = Watching(db_alias)
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    result = on_loop(LoopLeaser(broker), lambda leaser: leaser.enqueue(TaskSpec(type="t", queue="email")))

    assert result.created
    assert hooks.woken() == {"email"}
    [seen] = hooks.seen
    assert seen.visible == 1
    assert not woken_before_the_flush(seen)
