"""The store conformance suite: each store method, on SQLite and on PostgreSQL.

The broker suite (tests/broker) pins the rules through the broker; these pin
what each store writes for one transition, so a third store (or a change to
one) is checked method by method. Every test runs once per database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction

from conveyor.broker import Broker, TaskSpec
from conveyor.broker.rows import new_tasks
from conveyor.broker.validation import task_fields
from conveyor.models import Task, TaskAttempt, TaskDependency
from conveyor.states import State
from conveyor.store import NOBODY, Attempt, Runner, store_for

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tasks(n: int, **fields: Any) -> list[Task]:
    made = new_tasks([(f"t{i:03d}", task_fields(TaskSpec(type="t", **fields), NOW)) for i in range(n)])
    for task in made:
        task.state, task.enqueued_at, task.updated_at = State.PENDING, NOW, NOW
    return made


def _activate(alias: str, leases: dict[str, str]) -> None:
    store_for(alias).mark_leased(leases, NOW + timedelta(seconds=60), "holder", NOW)


@pytest.mark.parametrize("n", [1, 3, 25], ids=["one", "a few (VALUES)", "many (COPY)"])
def test_insert_tasks_stores_each_row_as_given(db_alias, n):
    tasks = _tasks(n, payload=b"\x00\x01", metadata={"k": "v"})
    store_for(db_alias).insert_tasks(tasks)

    stored = {t.id: t for t in Task.objects.using(db_alias).all()}
    assert sorted(stored) == [t.id for t in tasks]
    row = stored[tasks[-1].id]
    assert (bytes(row.payload), row.metadata, row.state) == (b"\x00\x01", {"k": "v"}, State.PENDING)


def test_mark_leased_gives_each_row_its_own_lease(db_alias):
    store_for(db_alias).insert_tasks(_tasks(2))
    _activate(db_alias, {"t000": "lease-a", "t001": "lease-b"})

    rows = {t.id: t for t in Task.objects.using(db_alias).all()}
    assert {i: (r.state, r.lease_id, r.lease_holder) for i, r in rows.items()} == {
        "t000": (State.ACTIVE, "lease-a", "holder"),
        "t001": (State.ACTIVE, "lease-b", "holder"),
    }


def test_complete_many_completes_only_rows_under_their_own_lease(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(3))
    _activate(db_alias, {"t000": "a", "t001": "b", "t002": "c"})

    # t001 names t000's lease: no item's lease vouches for another.
    won = store.complete_many({"t000": ("a", b"r"), "t001": ("a", None), "t002": ("c", None)}, NOW, 30.0, 25, {})

    assert sorted(r.id for r in won) == ["t000", "t002"]
    rows = {t.id: t for t in Task.objects.using(db_alias).all()}
    assert rows["t000"].state == State.COMPLETED and bytes(rows["t000"].result) == b"r"
    assert rows["t000"].purge_at == NOW + timedelta(seconds=30)
    assert rows["t001"].state == State.ACTIVE


def test_release_and_extend_match_each_rows_own_lease(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    _activate(db_alias, {"t000": "a", "t001": "b"})
    later = NOW + timedelta(seconds=600)

    assert store.extend({"t000": "a", "t001": "wrong"}, later) == {"t000"}
    with transaction.atomic(using=db_alias):  # (a lock is for the caller's transaction)
        assert [r.id for r in store.lock_active({"t000": "a", "t001": "wrong"})] == ["t000"]
    store.release(["t000"], NOW)

    rows = {t.id: t for t in Task.objects.using(db_alias).all()}
    assert (rows["t000"].state, rows["t000"].lease_holder, rows["t000"].started_at) == (State.PENDING, "", None)
    assert rows["t001"].lease_expires_at == NOW + timedelta(seconds=60)  # its lease was not the one named


def test_the_one_statement_lease_is_postgresqls_alone(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    params = {"now": NOW, "queue": "default", "lease": "L.", "expires": NOW, "holder": "h", "policy": "fifo", "n": 5}

    rows = store.lease(params, "fifo")

    if store.vendor == "sqlite":
        assert rows is None  # the broker takes its locked path
    else:
        assert sorted(r[0] for r in rows if r[0] is not None) == ["t000", "t001"]
        assert {t.state for t in Task.objects.using(db_alias).all()} == {State.ACTIVE}


def test_purge_keeps_a_row_an_unresolved_edge_points_at(db_alias, clock):
    broker = Broker(clock=clock, using=db_alias)
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    Task.objects.using(db_alias).update(state=State.COMPLETED, purge_at=NOW, finished_at=NOW)
    dependent = _tasks(1)[0]
    dependent.id, dependent.state = "dep", State.BLOCKED
    store.insert_tasks([dependent])
    TaskDependency.objects.using(db_alias).create(task_id="dep", depends_on_id="t001")

    assert store.purge(NOW, NOW, 100) == 1
    assert sorted(Task.objects.using(db_alias).values_list("id", flat=True)) == ["dep", "t001"]
    assert broker.get_task("t001").state == State.COMPLETED


# -- attempt history ------------------------------------------------------------------

WORKER = Runner("session-1", {"zone": "eu"}, "node-1")


def _attempts(alias: str) -> list[tuple[Any, ...]]:
    rows = TaskAttempt.objects.using(alias).order_by("task_id", "number")
    return [
        (a.task_id, a.number, a.outcome, a.worker_session, a.worker_labels, a.node, a.error, a.started_at) for a in rows
    ]


def test_complete_many_records_each_winners_attempt_with_who_ran_it(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(3))
    _activate(db_alias, {"t000": "a", "t001": "b", "t002": "c"})

    store.complete_many(
        {"t000": ("a", None), "t001": ("b", None), "t002": ("wrong", None)}, NOW + timedelta(seconds=5), 0.0, 25,
        {"t000": WORKER},
    )  # fmt: skip

    # t001 names no runner: its node is its lease holder's; t002's lease was lost: no attempt.
    assert _attempts(db_alias) == [
        ("t000", 1, "completed", "session-1", {"zone": "eu"}, "node-1", "", NOW),
        ("t001", 1, "completed", "", {}, "holder", "", NOW),
    ]
    assert {a.finished_at for a in TaskAttempt.objects.using(db_alias).all()} == {NOW + timedelta(seconds=5)}


def test_complete_many_keeps_the_last_kept_attempts_and_none_when_kept_is_zero(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    with transaction.atomic(using=db_alias):
        store.record_attempts([Attempt("t000", NOW, "retry", "e1")], NOW, 2)
        store.record_attempts([Attempt("t000", NOW, "retry", "e2")], NOW, 2)
    _activate(db_alias, {"t000": "a", "t001": "b"})

    store.complete_many({"t000": ("a", None)}, NOW, 0.0, 2, {})
    store.complete_many({"t001": ("b", None)}, NOW, 0.0, 0, {})

    assert [(t, n, o) for t, n, o, *_ in _attempts(db_alias)] == [("t000", 2, "retry"), ("t000", 3, "completed")]


def test_record_attempts_numbers_each_after_its_tasks_last_and_trims_to_kept(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    by = Runner("s", {"k": 1}, "n")

    with transaction.atomic(using=db_alias):
        for i in range(4):
            store.record_attempts(
                [Attempt("t000", NOW, "retry", f"boom {i}", by), Attempt("t001", None, "released")], NOW, 3
            )

    assert [(t, n, e) for t, n, _o, _s, _l, _n, e, _at in _attempts(db_alias)] == [
        ("t000", 2, "boom 1"), ("t000", 3, "boom 2"), ("t000", 4, "boom 3"),
        ("t001", 2, ""), ("t001", 3, ""), ("t001", 4, ""),
    ]  # fmt: skip
    assert _attempts(db_alias)[0][3:6] == ("s", {"k": 1}, "n")


def test_a_tasks_attempts_are_deleted_with_it_by_the_purge(db_alias):
    store = store_for(db_alias)
    store.insert_tasks(_tasks(2))
    _activate(db_alias, {"t000": "a", "t001": "b"})
    store.complete_many({"t000": ("a", None), "t001": ("b", None)}, NOW, 0.0, 25, {})
    Task.objects.using(db_alias).filter(id="t001").update(purge_at=NOW + timedelta(days=1))

    assert store.purge(NOW, NOW, 100) == 1

    assert [t for t, *_ in _attempts(db_alias)] == ["t001"]


def test_an_attempts_error_is_sealed_under_its_key_and_opened_when_read(db_alias):
    from django.test import override_settings

    from tests.broker.test_encryption import K1, MARKER

    store = store_for(db_alias)
    store.insert_tasks(_tasks(1))
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}), transaction.atomic(using=db_alias):
        store.record_attempts([Attempt("t000", NOW, "retry", f"declined {MARKER.decode()}", NOBODY, "k1")], NOW, 5)
        with transaction.get_connection(db_alias).cursor() as cursor:
            cursor.execute("SELECT error FROM conveyor_taskattempt")
            (raw,) = cursor.fetchone()
        assert raw.startswith("sealed:") and MARKER.decode() not in raw
        assert TaskAttempt.objects.using(db_alias).get().error == f"declined {MARKER.decode()}"
