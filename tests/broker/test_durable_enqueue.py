"""An enqueue is durable before anyone hears of it: the wake follows the durable commit.

Real PostgreSQL. At the moment of the wake the hooks look at the server
from a session of their own (is the task visible? is its commit in the WAL
flushed to disk? what did the enqueuing session run last?) and at the
enqueuing connection (is a statement in flight on it?).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction
from psycopg.pq import TransactionStatus

from conveyor.broker import Broker, TaskSpec
from conveyor.dispatch.loop_lease import APPLICATION_NAME, LoopLeaser
from conveyor.notify.hooks import RecordingHooks
from tests.broker.factories import on_loop

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


@dataclass
class Seen:
    visible: int  # tasks another session could read
    last_statement: str  # what the enqueuing session ran last
    in_flight: bool  # a statement was running on the enqueuing connection
    flushed: bool | None = None  # the task's commit was in the WAL on disk (None: not looked at)


Session = tuple[int, bool]  # a session's server pid; whether a statement is running on it


class Watching(RecordingHooks):
    """Hooks that, at each wake, look at the server and at the enqueuing connection."""

    reaches_other_processes = True  # as a producer's hooks on Redis

    def __init__(self, alias: str, enqueuing: Callable[[], Session], *, wal_since: str | None = None) -> None:
        super().__init__()
        self.alias = alias
        self.enqueuing = enqueuing  # -> the enqueuing session, as it is now
        self.wal_since = wal_since  # also look whether the task's commit is flushed (needs pg_walinspect)
        self.seen: list[Seen] = []

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        super().wake(queues, at)
        pid, in_flight = self.enqueuing()
        with observer(self.alias) as other:
            visible = other.execute("SELECT count(*) FROM conveyor_task").fetchone()[0]
            last = other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
            statement = last.fetchone()[0]
        self.seen.append(
            Seen(visible, statement, in_flight, _commit_flushed(self.alias, self.wal_since) if self.wal_since else None)
        )


def djangos(alias: str) -> Callable[[], Session]:
    connections[alias].ensure_connection()

    def session() -> Session:
        conn = connections[alias].connection
        return conn.info.backend_pid, conn.pgconn.transaction_status == TransactionStatus.ACTIVE

    return session


def leasers(alias: str) -> Callable[[], Session]:
    """A one-connection leaser's session, as the server sees it."""

    def session() -> Session:
        with observer(alias) as other:
            pid, state = other.execute(
                "SELECT pid, state FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
                [APPLICATION_NAME],
            ).fetchone()
        return pid, state == "active"

    return session


def observer(alias: str) -> psycopg.Connection[Any]:
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    return psycopg.connect(**params, autocommit=True)


@pytest.fixture
def walinspect(db_alias: str) -> None:
    with observer(db_alias) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except (psycopg.errors.UndefinedFile, psycopg.errors.InsufficientPrivilege) as exc:
            pytest.skip(f"reading the WAL needs pg_walinspect: {exc}")


def wal_position(alias: str) -> str:
    with observer(alias) as conn:
        return conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]


def _commit_flushed(alias: str, since: str) -> bool:
    """Whether the commit record of the one stored task's transaction is in the WAL flushed to disk."""
    with observer(alias) as conn:
        xid = conn.execute("SELECT xmin::text FROM conveyor_task").fetchone()[0]
        rows = conn.execute(
            "SELECT count(*) FROM pg_get_wal_records_info(%s::pg_lsn, pg_current_wal_flush_lsn()) "
            "WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT' AND xid::text = %s",
            [since, xid],
        ).fetchone()[0]
    return rows == 1


def test_a_due_task_wakes_the_nodes_once_its_commit_is_on_disk(db_alias, clock, walinspect):
    hooks = Watching(db_alias, djangos(db_alias), wal_since=wal_position(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert hooks.woken() == {"email"}
    [seen] = hooks.seen
    assert seen.visible == 1
    assert seen.flushed is True
    assert not seen.in_flight  # one statement, answered before the wake
    assert [(e.kind, e.task_id) for e in hooks.events] == [("enqueued", task.id)]


def test_the_enqueue_leaves_the_session_committing_durably(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    broker.enqueue(TaskSpec(type="t"))

    assert not hooks.seen[0].in_flight
    with connections[db_alias].cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "on"


def test_in_a_callers_transaction_the_wake_waits_for_its_commit(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))
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
    assert not hooks.seen[0].in_flight


def test_in_a_transaction_django_does_not_know_of_the_insert_commits_durably(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    with connections[db_alias].cursor() as cursor:
        cursor.execute("BEGIN")  # Django's flags still say autocommit
        try:
            broker.enqueue(TaskSpec(type="t", queue="email"))
            cursor.execute("SELECT current_setting('synchronous_commit')")
            setting = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK")

    assert setting == "on"


@pytest.mark.parametrize("fields", [{"id": "mine-1"}, {"unique_key": "u"}], ids=["own id", "unique key"])
def test_tasks_that_need_a_transaction_commit_durably_before_the_wake(db_alias, clock, fields):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    broker.enqueue(TaskSpec(type="t", queue="email", **fields))

    [seen] = hooks.seen
    assert seen.visible == 1
    assert not seen.in_flight
    assert "pg_logical_emit_message" not in seen.last_statement
    assert len(hooks.events) == 1


def test_a_scheduled_task_wakes_nobody_and_commits_durably(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))  # hooks that would wake before the flush
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    task = broker.enqueue(TaskSpec(type="t", queue="email", process_in=60))

    assert hooks.wakes == []
    assert [e.kind for e in hooks.events] == ["scheduled"]
    with observer(db_alias) as conn:
        last = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s", [connections[db_alias].connection.info.backend_pid]
        ).fetchone()[0]
    assert "pg_logical_emit_message" not in last and "synchronous_commit" not in last
    assert broker.get_task(task.id).state == "scheduled"


def test_on_a_nodes_loop_the_insert_commits_durably_before_the_wake(db_alias, clock):
    broker = Broker(clock=clock, using=db_alias)
    leaser = LoopLeaser(broker)
    hooks = Watching(db_alias, leasers(db_alias))
    broker.hooks = hooks

    result = on_loop(leaser, lambda leaser: leaser.enqueue(TaskSpec(type="t", queue="email")))

    assert result.created
    assert hooks.woken() == {"email"}
    [seen] = hooks.seen
    assert seen.visible == 1
    assert not seen.in_flight
    assert "INSERT INTO conveyor_task" in seen.last_statement.replace('"', "")  # (taking an offer if there is one)
    assert "synchronous_commit" not in seen.last_statement


def test_with_nobody_to_wake_the_insert_commits_durably_in_one_statement(broker, db_alias):
    # The broker fixture's hooks send no wake anywhere (as a producer's without Redis).
    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    with observer(db_alias) as conn:
        last = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s", [connections[db_alias].connection.info.backend_pid]
        ).fetchone()[0]
    assert last.replace(chr(34), "").startswith("INSERT INTO conveyor_task") and "synchronous_commit" not in last
    assert broker.hooks.woken() == {"email"}
    assert [e.task_id for e in broker.hooks.events] == [task.id]
