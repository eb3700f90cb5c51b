"""The hot-path statements as server-side prepared statements (PostgreSQL)."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connections
from django.test import override_settings

from conveyor.states import State
from tests.broker.factories import enqueue, reload


def _prepared(alias: str) -> list[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _forget_prepared(alias: str) -> None:
    connections[alias].close()  # a new session has none


# Prepared statements are a PostgreSQL matter: only that database.
pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


@pytest.fixture
def pg_broker(broker, db_alias):
    _forget_prepared(db_alias)
    return broker


@override_settings(CONVEYOR={"PREPARED_STATEMENTS": True})
def test_lease_ack_and_enqueue_are_prepared_once_and_reused(pg_broker, db_alias):
    for _ in range(3):
        task = enqueue(pg_broker)
        leased = pg_broker.lease("default", 1).tasks
        assert [t.id for t in leased] == [task.id]
        pg_broker.ack_many([(leased[0], None)])
        assert reload(pg_broker, task.id).state == State.COMPLETED
    statements = _prepared(db_alias)
    assert sum("FOR UPDATE SKIP LOCKED" in s for s in statements) == 1  # the lease
    assert sum("SET state = 'completed'" in s for s in statements) == 1  # the ack
    assert sum(s.startswith("INSERT INTO") for s in statements) == 1  # one task's insert


@override_settings(CONVEYOR={"PREPARED_STATEMENTS": True})
def test_acks_of_any_size_and_result_share_one_prepared_statement(pg_broker, db_alias):
    for size in (1, 2, 3, 12):
        for i in range(size):
            enqueue(pg_broker, payload=str(i).encode())
        leased = pg_broker.lease("default", size).tasks
        assert len(leased) == size
        # None and bytes results mixed: psycopg would key a VALUES form by each.
        pg_broker.ack_many([(t, None if n % 2 else b"r") for n, t in enumerate(leased)])
    statements = _prepared(db_alias)
    assert sum("SET state = 'completed'" in s for s in statements) == 1
    assert sum(s.startswith("INSERT INTO") for s in statements) == 1  # one-task inserts only


def test_with_prepared_statements_off_nothing_is_prepared_and_all_works(pg_broker, db_alias):
    with override_settings(CONVEYOR={"PREPARED_STATEMENTS": False}):
        task = enqueue(pg_broker)
        leased = pg_broker.lease("default", 1).tasks
        pg_broker.ack_many([(leased[0], None)])
        assert reload(pg_broker, task.id).state == State.COMPLETED
        assert _prepared(db_alias) == []


def test_a_broken_connection_is_replaced_after_a_prepared_statement_fails(pg_broker, db_alias):
    enqueue(pg_broker)
    pg_broker.lease("default", 1)  # prepared on this session
    connection = connections[db_alias]
    other = connections.create_connection(db_alias)
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    finally:
        other.close()

    with pytest.raises(OperationalError):  # Django's error, not psycopg's
        pg_broker.lease("default", 1)
    assert connection.errors_occurred
    connection.close_if_unusable_or_obsolete()  # what a node's database thread does before each call
    task = enqueue(pg_broker)
    assert [t.id for t in pg_broker.lease("default", 1).tasks] == [task.id]
