"""An enqueue wakes the nodes once its task is visible, and returns once it is durable.

Real PostgreSQL. At the moment of the wake the hooks look at the server
from a session of their own (is the task visible? what did the enqueuing
session run last?) and at the enqueuing connection (is a statement in
flight on it?). Once the enqueue has returned, the test reads the WAL
flushed to disk (pg_walinspect): the INSERT's commit, then a transaction
that wrote a message and committed, the one whose synchronous commit
flushed both. Only hooks whose wake is a round trip (a producer's PUBLISH
to Redis) take this path; a node's own enqueues, and a producer with
nobody to wake, commit durably in one statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import pytest
from django.db import IntegrityError, connections, transaction
from django.test import override_settings
from psycopg.pq import TransactionStatus

from conveyor.broker import Broker, TaskSpec, pg
from conveyor.broker.offers import MISS_PAUSE
from conveyor.broker.rows import new_task
from conveyor.broker.validation import task_fields
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.ids import new_ulid
from conveyor.models import Task
from conveyor.notify.hooks import RecordingHooks
from tests.broker.factories import on_loop

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


@dataclass
class Seen:
    visible: int  # tasks another session could read
    last_statement: str  # what the enqueuing session ran last
    in_flight: bool  # a statement was running on the enqueuing connection


class Watching(RecordingHooks):
    """Hooks that, at each wake, look at the server and at the enqueuing connection."""

    wake_is_a_round_trip = True  # as a producer's hooks on Redis

    def __init__(self, alias: str, enqueuing: Callable[[], Any]) -> None:
        super().__init__()
        self.alias = alias
        self.enqueuing = enqueuing  # -> the enqueuing psycopg connection
        self.seen: list[Seen] = []

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        super().wake(queues, at)
        conn = self.enqueuing()
        in_flight = conn.pgconn.transaction_status == TransactionStatus.ACTIVE
        with observer(self.alias) as other:
            visible = other.execute("SELECT count(*) FROM conveyor_task").fetchone()[0]
            last = other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [conn.info.backend_pid])
        self.seen.append(Seen(visible, last.fetchone()[0], in_flight))


def djangos(alias: str) -> Callable[[], Any]:
    connections[alias].ensure_connection()
    return lambda: connections[alias].connection


def leasers(leaser: LoopLeaser) -> Callable[[], Any]:
    """The leaser's connection in use, or the one last put back."""
    return lambda: next(iter(leaser._busy)) if leaser._busy else leaser._idle[-1]


def observer(alias: str) -> psycopg.Connection[Any]:
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    return psycopg.connect(**params, autocommit=True)


def woken_before_the_flush(seen: Seen) -> bool:
    """Woken after the INSERT that commits without the flush, while the
    statement that waits for the flush runs (sent before the wake, its
    answer read after)."""
    return seen.in_flight and "pg_logical_emit_message" in seen.last_statement


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


def flushed_after_the_insert(alias: str, since: str, task_id: str) -> list[str]:
    """What the flushed WAL holds from the INSERT's commit on: "insert
    committed", "message" (written by a transaction that has an id) and
    "message committed" (that transaction's commit), in WAL order."""
    with observer(alias) as conn:
        xid = conn.execute("SELECT xmin::text FROM conveyor_task WHERE id = %s", [task_id]).fetchone()[0]
        rows = conn.execute(
            "SELECT resource_manager, record_type, xid::text FROM "
            "pg_get_wal_records_info(%s::pg_lsn, pg_current_wal_flush_lsn()) ORDER BY start_lsn",
            [since],
        ).fetchall()
    seen: list[str] = []
    message_xid = None
    for manager, kind, record_xid in rows:
        if manager == "Transaction" and kind == "COMMIT" and record_xid == xid:
            seen.append("insert committed")
        elif seen and manager == "LogicalMessage" and record_xid != "0" and message_xid is None:
            message_xid = record_xid
            seen.append("message")
        elif message_xid is not None and manager == "Transaction" and kind == "COMMIT" and record_xid == message_xid:
            seen.append("message committed")
    return seen


def test_a_due_task_wakes_the_nodes_once_visible_and_before_its_flush(db_alias, clock, walinspect):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    since = wal_position(db_alias)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert hooks.woken() == {"email"}
    [seen] = hooks.seen
    assert seen.visible == 1
    assert woken_before_the_flush(seen)
    # The enqueue returned once a synchronous commit after the INSERT's was on disk.
    assert flushed_after_the_insert(db_alias, since, task.id) == ["insert committed", "message", "message committed"]
    assert [(e.kind, e.task_id) for e in hooks.events] == [("enqueued", task.id)]


def test_the_enqueue_leaves_the_session_committing_durably(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    broker.enqueue(TaskSpec(type="t"))

    assert woken_before_the_flush(hooks.seen[0])  # it took the path that sets synchronous_commit
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


@override_settings(CONVEYOR={"ENQUEUE_WAKE_BEFORE_FLUSH": False})
def test_the_setting_turns_it_off(db_alias, clock):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    broker.enqueue(TaskSpec(type="t", queue="email"))

    [seen] = hooks.seen
    assert seen.visible == 1
    assert not seen.in_flight
    assert "synchronous_commit" not in seen.last_statement


def test_on_a_nodes_loop_the_insert_commits_durably_before_the_wake(db_alias, clock):
    # A node's wake only schedules its dispatchers: no round trip for the
    # flush to overlap, so the one durable INSERT is cheaper.
    broker = Broker(clock=clock, using=db_alias)
    leaser = LoopLeaser(broker)
    hooks = Watching(db_alias, leasers(leaser))
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
    assert last.startswith('INSERT INTO "conveyor_task"') and "synchronous_commit" not in last
    assert broker.hooks.woken() == {"email"}
    assert [e.task_id for e in broker.hooks.events] == [task.id]


# -- the INSERT and the flush's statement go out together (pg.insert_then_flush) -----


def test_the_enqueue_survives_its_prepared_statement_being_dropped(db_alias, clock):
    # psycopg drops every prepared statement of its session (DEALLOCATE ALL)
    # after a ROLLBACK, a DROP or an ALTER on the connection.
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    broker.enqueue(TaskSpec(type="t", queue="email"))
    backend = connections[db_alias].connection.info.backend_pid

    with connections[db_alias].cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    clock.advance(MISS_PAUSE.total_seconds())  # the same statement again (it found no offer to take)
    second = broker.enqueue(TaskSpec(type="t", queue="email"))
    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        pg.run(db_alias, "SELECT count(*) FROM conveyor_task WHERE queue = %s", ["email"])  # one of psycopg's
        raise RuntimeError("rolled back")
    clock.advance(MISS_PAUSE.total_seconds())
    third = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert Task.objects.using(db_alias).filter(id__in=[second.id, third.id]).count() == 2
    assert connections[db_alias].connection.info.backend_pid == backend  # no error closed it
    assert len(hooks.wakes) == 3 and all(woken_before_the_flush(seen) for seen in hooks.seen)


def test_the_flush_statement_dropped_alone_still_waits_for_the_flush(db_alias, clock, walinspect):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    broker.enqueue(TaskSpec(type="t", queue="email"))
    [flush_statement] = [name for name, text in prepared_texts(db_alias).items() if "pg_logical_emit_message" in text]
    with connections[db_alias].cursor() as cursor:
        cursor.execute(f"DEALLOCATE {flush_statement}")
    since = wal_position(db_alias)

    second = broker.enqueue(TaskSpec(type="t", queue="email"))  # its INSERT commits; then the flush unprepared

    assert Task.objects.using(db_alias).filter(id=second.id).exists()
    assert flushed_after_the_insert(db_alias, since, second.id) == ["insert committed", "message", "message committed"]
    third = broker.enqueue(TaskSpec(type="t", queue="email"))  # prepared again
    assert Task.objects.using(db_alias).filter(id=third.id).exists()
    assert sum("pg_logical_emit_message" in text for text in prepared_texts(db_alias).values()) == 1


def test_an_insert_statement_dropped_by_name_is_prepared_again_and_the_rest_kept(db_alias, clock):
    broker = Broker(clock=clock, using=db_alias, hooks=Watching(db_alias, djangos(db_alias)))
    broker.enqueue(TaskSpec(type="t", queue="email"))
    before = prepared_texts(db_alias)
    [insert] = [name for name, text in before.items() if "INSERT INTO" in text and "conveyor_offer" in text]
    with connections[db_alias].cursor() as cursor:
        cursor.execute(f"DEALLOCATE {insert}")
    clock.advance(MISS_PAUSE.total_seconds())  # the same statement again (it found no offer to take)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert Task.objects.using(db_alias).filter(id=task.id).exists()
    after = prepared_texts(db_alias)
    assert insert not in after and list(after.values()).count(before[insert]) == 1
    flush = {name for name, text in before.items() if "pg_logical_emit_message" in text}
    assert flush and flush <= set(after)  # the flush's statement kept its name
    assert sum("pg_logical_emit_message" in text for text in after.values()) == 1  # and was not made again


def prepared_texts(alias: str) -> dict[str, str]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT name, statement FROM pg_prepared_statements")
        return dict(cursor.fetchall())


def _row_refused_by_the_table(clock: Any) -> tuple[str, list[Any]]:
    now = clock.now()
    fields = {**task_fields(TaskSpec(type="t", queue="email"), now), "state": "pending", "priority": 0}
    sql, params = pg.insert_statement([new_task(new_ulid(now), {**fields, "enqueued_at": now, "updated_at": now})])
    return sql + pg.VISIBLE_FIRST, params


def test_an_insert_the_table_refuses_raises_calls_nothing_and_stores_nothing(db_alias, clock):
    sql, params = _row_refused_by_the_table(clock)  # priority 0: outside the table's CHECK
    called: list[Any] = []

    with pytest.raises(IntegrityError):
        pg.insert_then_flush(db_alias, sql, params, called.append)

    assert called == [] and not Task.objects.using(db_alias).exists()
    broker = Broker(clock=clock, using=db_alias, hooks=Watching(db_alias, djangos(db_alias)))
    assert broker.enqueue(TaskSpec(type="t", queue="email")).state == "pending"  # the next one works


def test_a_then_that_raises_leaves_the_task_committed_and_durable(db_alias, clock, walinspect, monkeypatch):
    # (An enqueue's announcement logs its hooks' errors; this is anything else.)
    since = wal_position(db_alias)
    now = clock.now()
    fields = {**task_fields(TaskSpec(type="t"), now), "state": "pending", "enqueued_at": now, "updated_at": now}
    task = new_task(new_ulid(now), fields)
    sql, params = pg.insert_statement([task])

    def then(row: tuple[Any, ...]) -> None:
        raise KeyboardInterrupt

    discarded: list[Any] = []
    discard = pg._discard

    def watch_discard(connection: Any) -> None:
        discarded.append(connection.connection.pgconn.transaction_status)
        discard(connection)

    monkeypatch.setattr(pg, "_discard", watch_discard)
    with pytest.raises(KeyboardInterrupt):
        pg.insert_then_flush(db_alias, sql + pg.VISIBLE_FIRST, params, then)

    # The connection was closed, and only after the flush's answer was read.
    assert discarded == [TransactionStatus.IDLE] and connections[db_alias].connection is None
    assert Task.objects.using(db_alias).filter(id=task.id).exists()  # committed before *then*
    assert flushed_after_the_insert(db_alias, since, task.id) == ["insert committed", "message", "message committed"]
    broker = Broker(clock=clock, using=db_alias, hooks=Watching(db_alias, djangos(db_alias)))
    assert broker.enqueue(TaskSpec(type="t", queue="email")).state == "pending"  # on a new connection


@override_settings(CONVEYOR={"PREPARED_STATEMENTS": False})
def test_without_prepared_statements_the_two_statements_go_one_after_the_other(db_alias, clock, walinspect):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    since = wal_position(db_alias)
    before = prepared(db_alias)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert hooks.seen[0].visible == 1 and woken_before_the_flush(hooks.seen[0])
    assert flushed_after_the_insert(db_alias, since, task.id) == ["insert committed", "message", "message committed"]
    assert prepared(db_alias) == before  # nothing prepared for it


def prepared(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall()}


def test_a_connection_keeps_a_bounded_number_of_pipelined_statements(db_alias, clock, monkeypatch):
    monkeypatch.setattr(pg, "PIPELINED_MAX", 2)
    broker = Broker(clock=clock, using=db_alias, hooks=Watching(db_alias, djangos(db_alias)))
    # Each pattern of None among the optional fields is a statement of its own.
    specs = [TaskSpec(type="t"), TaskSpec(type="t", timeout=5), TaskSpec(type="t", retention=5, timeout=5)]
    broker.enqueue(specs[0])
    [flush] = [name for name, text in prepared_texts(db_alias).items() if "pg_logical_emit_message" in text]
    for spec in specs[1:] + specs:  # past the bound twice
        broker.enqueue(spec)

    assert Task.objects.using(db_alias).count() == 6
    ours = {name: text for name, text in prepared_texts(db_alias).items() if name.startswith("conveyor_pipelined_")}
    assert 1 <= sum("INSERT INTO" in text for text in ours.values()) <= 2  # the bound: INSERTs
    assert [name for name, text in ours.items() if "pg_logical_emit_message" in text] == [flush]  # kept throughout


def test_statements_dropped_before_the_bound_is_reached_do_not_stop_the_next_one(db_alias, clock, monkeypatch):
    monkeypatch.setattr(pg, "PIPELINED_MAX", 2)
    broker = Broker(clock=clock, using=db_alias, hooks=Watching(db_alias, djangos(db_alias)))
    broker.enqueue(TaskSpec(type="t"))
    broker.enqueue(TaskSpec(type="t", timeout=5))  # two INSERT statements: the bound
    with connections[db_alias].cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")

    broker.enqueue(TaskSpec(type="t", retention=5, timeout=5))  # a third pattern: the two go first

    assert Task.objects.using(db_alias).count() == 3


def test_a_hook_that_uses_the_connection_during_the_flush_fails_loudly_instead_of_hanging(db_alias, clock, caplog):
    hooks = Watching(db_alias, djangos(db_alias))
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)

    def wake_with_a_query(queues: Iterable[str], at: datetime | None = None) -> None:
        Task.objects.using(db_alias).count()  # the enqueuing connection, busy with the flush

    hooks.wake = wake_with_a_query  # type: ignore[method-assign]
    task = broker.enqueue(TaskSpec(type="t", queue="email"))  # returns (a hook's error is logged)

    assert "busy with an enqueue's flush" in caplog.text
    assert Task.objects.using(db_alias).get(id=task.id).state == "pending"  # the connection still works
