"""Leasing on the event loop (conveyor.dispatch.loop_lease) against real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.test import override_settings

from conveyor.broker import TaskSpec
from conveyor.dispatch.loop_lease import APPLICATION_NAME, LoopLeaser
from conveyor.states import State
from conveyor.store.base import Attempt
from conveyor.store.postgres import attempt_params, complete_params, complete_sql, lease_sql
from conveyor.store.sql import statement
from tests.broker.factories import enqueue, on_loop, own_sessions, reload

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)


def _lease(leaser: LoopLeaser, queue: str, n: int):
    return on_loop(leaser, lambda leaser: leaser.lease(queue, n, "loop-holder"))


@pytest.fixture
def leaser(broker):
    return LoopLeaser(broker)


def test_leases_the_due_task_like_the_broker_and_records_the_holder(broker, leaser, clock, hooks):
    task = enqueue(broker, priority=7)
    later = enqueue(broker, process_in=60)

    batch = _lease(leaser, "default", 10)

    assert [t.id for t in batch.tasks] == [task.id]
    leased = batch.tasks[0]
    assert leased.due_at == task.due_at and leased.enqueued_at == task.enqueued_at
    stored = reload(broker, task.id)
    assert stored.state == State.ACTIVE and stored.lease_holder == "loop-holder"
    assert stored.lease_id == leased.lease_id
    assert stored.lease_expires_at > clock.now()
    assert reload(broker, later.id).state == State.SCHEDULED
    assert [e.kind for e in hooks.events if e.task_id == task.id][-1] == "leased"


def test_a_lease_on_the_loop_says_which_tasks_are_suspects_of_a_crash(broker, leaser, clock):
    for _ in range(2):
        enqueue(broker)
    crashed = broker.lease("default", 2).tasks
    broker.settle_crash([(t.id, t.lease_id) for t in crashed])
    clock.advance(3600)
    fresh = enqueue(broker)

    batch = _lease(leaser, "default", 3)

    assert {t.id: t.suspect for t in batch.tasks} == {crashed[0].id: True, crashed[1].id: True, fresh.id: False}


def test_timestamps_survive_a_server_whose_default_time_zone_is_not_utc(broker, leaser, db_alias):
    name = connections[db_alias].settings_dict["NAME"]
    with connections[db_alias].cursor() as cursor:
        cursor.execute(f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'")
    try:
        task = enqueue(broker, deadline=broker.now() + timedelta(hours=1))
        leased = _lease(leaser, "default", 1).tasks[0]
    finally:
        with connections[db_alias].cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" RESET timezone')
    assert (leased.due_at, leased.enqueued_at, leased.deadline) == (task.due_at, task.enqueued_at, task.deadline)


def test_a_queue_with_limits_is_left_to_the_locked_path(broker, leaser):
    enqueue(broker)
    broker.set_rate_limit("default", 5, 1)

    assert _lease(leaser, "default", 1) is None
    assert broker.get_task(broker.tasks.get().id).state == State.PENDING  # nothing claimed


def _session_setting(leaser: LoopLeaser, name: str) -> str:
    async def setting(conn):
        return (await (await conn.execute("SELECT current_setting(%s)", [name])).fetchone())[0]

    async def go(leaser):
        await leaser.lease("default", 1, "h")
        return await leaser.run(setting)  # the connection that leased: the pool's one

    return on_loop(leaser, go)


def test_the_connection_is_named_for_operators(broker, leaser):
    assert _session_setting(leaser, "application_name") == APPLICATION_NAME


def _last_lease_statement(leaser: LoopLeaser) -> tuple[str, str]:
    """Lease once; the statement the lease connection last ran (as the server saw
    it) and the session's synchronous_commit afterwards."""

    def seen_by_the_server(pid: int) -> str:  # in a thread of its own: close what it opens
        try:
            with connections["postgres"].cursor() as cursor:
                cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
                return cursor.fetchone()[0]
        finally:
            connections["postgres"].close()

    async def look(conn):
        statement = await asyncio.to_thread(seen_by_the_server, conn.info.backend_pid)
        setting = (await (await conn.execute("SELECT current_setting('synchronous_commit')")).fetchone())[0]
        return statement, setting

    async def go(leaser):
        await leaser.lease("default", 1, "h")
        return await leaser.run(look)  # the connection that leased: the pool's one

    return on_loop(leaser, go)


def _session_default() -> str:
    with connections["postgres"].cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return cursor.fetchone()[0]


def test_a_lease_commits_without_waiting_for_the_wal_flush_and_leaves_the_session_as_it_was(broker, leaser):
    enqueue(broker)
    _, setting = _last_lease_statement(leaser)
    assert setting == _session_default()  # nothing left behind for a pooler to hand on

    # The statement the lease sends turns the flush wait off for its own transaction.
    params, policy = broker.concerns.leases.statement_params("default", 1, "h", broker.now())
    with connections["postgres"].cursor() as cursor, transaction.atomic(using="postgres"):
        cursor.execute(lease_sql(policy, by_key=False, async_commit=True), params)
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone()[0] == "off"
    assert _session_default() != "off"


def test_the_lease_statement_carries_the_setting_only_when_lease_async_commit_is_on(broker, leaser):
    with override_settings(CONVEYOR={"LEASE_ASYNC_COMMIT": True}):
        enqueue(broker)
        statement, _ = _last_lease_statement(leaser)
    assert "set_config('synchronous_commit', 'off', true)" in statement
    with override_settings(CONVEYOR={"LEASE_ASYNC_COMMIT": False}):
        enqueue(broker)
        statement, _ = _last_lease_statement(leaser)
    assert "UPDATE conveyor_task" in statement and "synchronous_commit" not in statement


@pytest.mark.parametrize("size", [1, 3])
def test_concurrent_leases_of_several_queues_use_at_most_size_connections(broker, size):
    queues = [f"q{i}" for i in range(5)]
    tasks = {q: enqueue(broker, queue=q).id for q in queues}
    leaser = LoopLeaser(broker, size)

    async def held_a_while(conn):
        await asyncio.sleep(0.2)  # far longer than opening a connection takes
        return conn.info.backend_pid

    async def go(leaser):
        batches = await asyncio.gather(*(leaser.lease(q, 1, "h") for q in queues))
        # Five at once that each keep their connection: the pool grows to size, no further.
        pids = await asyncio.gather(*(leaser.run(held_a_while) for _ in queues))
        return batches, set(pids), own_sessions("postgres")

    batches, used, sessions = on_loop(leaser, go)
    assert {b.tasks[0].queue: b.tasks[0].id for b in batches} == tasks
    assert len(used) == size
    assert sorted(sessions) == sorted(used)


def test_a_queue_whose_limit_is_lifted_leases_on_the_loop_again_after_one_locked_lease(broker, leaser):
    first, second, third = (enqueue(broker) for _ in range(3))
    broker.set_concurrency_limit("default", 5)
    assert _lease(leaser, "default", 1) is None  # limits: the locked path
    assert [t.id for t in broker.lease("default", 1).tasks] == [first.id]

    broker.delete_concurrency_limit("default")
    assert _lease(leaser, "default", 1) is None  # still remembered as limited ...
    assert [t.id for t in broker.lease("default", 1).tasks] == [second.id]  # ... until a locked lease looks
    assert [t.id for t in _lease(leaser, "default", 1).tasks] == [third.id]


def _plans_on_the_lease_connection(leaser: LoopLeaser, statements: list[tuple[str, list]]) -> list[dict]:
    """EXPLAIN each statement on a connection of *leaser*, as its session plans it."""

    async def go():
        async def explain(conn):
            plans = []
            # The plan a prepared statement keeps once it goes generic.
            await conn.execute("SET plan_cache_mode = force_generic_plan")
            for sql, params in statements:
                cursor = await conn.execute("EXPLAIN (FORMAT JSON) " + sql, params)
                plans.append((await cursor.fetchone())[0][0]["Plan"])
            return plans

        try:
            return await leaser.run(explain)
        finally:
            await leaser.close()

    return asyncio.run(go())


def _unbounded_task_scans(plan: dict) -> list[str]:
    """Plan nodes that read conveyor_task or its attempts (or an index) without an index condition."""
    found = []
    kind = plan["Node Type"]
    table = plan.get("Relation Name")
    reads_tasks = kind.endswith("Scan") and (table in ("conveyor_task", "conveyor_taskattempt") or "Index Name" in plan)
    if reads_tasks and (kind == "Seq Scan" or (kind != "Bitmap Heap Scan" and "Index Cond" not in plan)):
        found.append(f"{kind} {plan.get('Index Name', '')}".strip())
    for child in plan.get("Plans", []):
        found += _unbounded_task_scans(child)
    return found


@pytest.fixture
def empty_statistics(db_alias):
    """Statistics taken while conveyor_task was empty (and had no pages left
    by earlier tests), kept while the test fills it."""
    with connections["postgres"].cursor() as cursor:
        cursor.execute("ALTER TABLE conveyor_task SET (autovacuum_enabled = false)")
        cursor.execute("TRUNCATE conveyor_task, conveyor_taskdependency, conveyor_taskattempt")
        cursor.execute("ANALYZE conveyor_task")
    yield
    with connections["postgres"].cursor() as cursor:
        cursor.execute("ALTER TABLE conveyor_task RESET (autovacuum_enabled)")


def test_the_connection_turns_sequential_scans_off_and_plans_each_statement_once(broker, leaser):
    # Statistics taken while a queue table was near empty make the planner
    # price a read of the whole table below any index. And left to choose
    # between a generic and a per-call plan, PostgreSQL plans the lease on
    # every call once another queue has a backlog (planning costs more
    # than running it).
    assert _session_setting(leaser, "enable_seqscan") == "off"
    assert _session_setting(leaser, "plan_cache_mode") == "force_generic_plan"


def test_the_ack_finds_its_rows_by_key_on_the_loop_connection(broker, leaser, empty_statistics):
    # Statistics of an empty table, then active tasks.
    for _ in range(3):
        broker.enqueue_batch([TaskSpec(type="t", queue="other", payload=b"") for _ in range(100)])
    broker.lease("other", 150)  # active rows an ack must not read through
    wanted = {"01ABC": ("01ABC.lease", None), "01ABD": ("01ABD.lease", b"result")}
    now = broker.now()

    by_key, plain = _plans_on_the_lease_connection(
        leaser,
        [
            (complete_sql(by_key=True), complete_params(wanted, now, 0.0, 25, {})),
            (complete_sql(by_key=False), complete_params(wanted, now, 0.0, 25, {})),
        ],
    )

    assert _unbounded_task_scans(by_key) == [], by_key
    # Why the loop's ack is written by key: on the same connection the plain
    # form reads the whole index of active tasks for every batch of results.
    assert _unbounded_task_scans(plain) != [], plain


def _index_conditions(plan: dict, index: str) -> list[str]:
    found = [plan["Index Cond"]] if plan.get("Index Name") == index and "Index Cond" in plan else []
    for child in plan.get("Plans", []):
        found += _index_conditions(child, index)
    return found


def test_the_lease_claims_its_rows_by_key_on_the_loop_connection(broker, leaser, empty_statistics):
    # A backlog in another queue, analyzed; then the queue's own work.
    for _ in range(30):
        broker.enqueue_batch([TaskSpec(type="t", queue="other", payload=b"") for _ in range(100)])
    with connections["postgres"].cursor() as cursor:
        cursor.execute("VACUUM ANALYZE conveyor_task")
    for _ in range(10):
        broker.enqueue_batch([TaskSpec(type="t", payload=b"") for _ in range(100)])
        broker.ack_many([(t, None) for t in broker.lease("default", 100).tasks])
    enqueue(broker)
    params, policy = broker.concerns.leases.statement_params("default", 1, "h", broker.now())

    (plan,) = _plans_on_the_lease_connection(leaser, [(lease_sql(policy, by_key=True, async_commit=True), params)])

    assert _unbounded_task_scans(plan) == [], plan
    # The UPDATE looks its rows up by key: a join there can be planned (with
    # statistics older than the table's growth) as a merge join that walks
    # the whole primary key index up to the newest task it claims.
    assert any("ANY" in cond for cond in _index_conditions(plan, "conveyor_task_pkey")), plan


def test_recording_an_attempt_reads_only_its_own_tasks_attempts_on_the_loop_connection(
    broker, leaser, empty_statistics
):
    # A node prepares its statements once, when the attempts table may be
    # empty, and keeps the generic plan. Planned on an empty table, the trim
    # of attempts beyond ATTEMPTS_KEPT walked the whole attempts index for
    # every ack (an index scan with no condition): the ack's cost grew with
    # the attempts stored. Each task's attempts must be found by its key.
    with connections["postgres"].cursor() as cursor:
        cursor.execute("ANALYZE conveyor_taskattempt")
    wanted = {"01ABC": ("01ABC.lease", None), "01ABD": ("01ABD.lease", b"result")}
    now = broker.now()
    attempts = [Attempt("01ABC", now, "retry", "boom"), Attempt("01ABD", None, "released")]

    ack, record = _plans_on_the_lease_connection(
        leaser,
        [
            (complete_sql(by_key=True), complete_params(wanted, now, 0.0, 25, {})),
            (statement("record_attempts"), attempt_params(attempts, now, 25)),
        ],
    )

    assert _unbounded_task_scans(ack) == [], ack
    assert _unbounded_task_scans(record) == [], record
