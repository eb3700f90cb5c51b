"""Node death: the rescuer gives a dead node's leases back at once (docs/architecture.md).

A node is dead when its liveness lock (conveyor/dispatch/liveness.py) has
been free for ``DEATH_CONFIRM``: PostgreSQL frees it when the node's
session ends. Its tasks are released where they stood in line, with no
attempt charged and no suspect mark: a node runs no handler, so its death
is no evidence against them. Here locks are held on real sessions of the
test database, and time moves only through the fake clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from django.db import connections

from conveyor import cluster
from conveyor.broker.nodes import NODE_LOST
from conveyor.models import Node, Offer, Task
from conveyor.states import State
from conveyor.sweepers import Rescuer
from tests.broker.factories import enqueue, lease_one, reload

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def add_node(broker, node_id: str, *, keyed: bool = True) -> None:
    key = cluster.liveness_key(node_id) if keyed else None
    Node.objects.using(broker.db).create(id=node_id, host="h", started_at=NOW, seen_at=NOW, liveness_key=key)


def lease_to(broker, node_id: str, n: int) -> list:
    for _ in range(n):
        enqueue(broker)
    return broker.lease("default", n, holder=node_id).tasks


def two_passes(broker, clock, rescuer: Rescuer) -> list[dict[str, int]]:
    """A pass, then another once a free lock has been free for ``DEATH_CONFIRM``."""
    first = rescuer.run_once()
    clock.advance(cluster.DEATH_CONFIRM)
    return [first, rescuer.run_once()]


@pytest.fixture
def postgres(broker) -> None:
    if connections[broker.db].vendor != "postgresql":
        pytest.skip("liveness locks are PostgreSQL's")


@pytest.fixture
def hold_lock(broker) -> Iterator:
    """``hold_lock(node_id)``: hold that node's liveness lock on a session of its own."""
    held = []

    def hold(node_id: str) -> None:
        params = connections[broker.db].get_connection_params()
        params.pop("cursor_factory", None)
        conn = psycopg.connect(**params, autocommit=True)
        conn.execute("SELECT pg_advisory_lock(%s, %s)", [cluster.LIVENESS_NAMESPACE, cluster.liveness_key(node_id)])
        held.append(conn)

    yield hold
    for conn in held:
        conn.close()


def test_a_dead_nodes_task_is_released_with_nothing_charged_once_its_lock_stays_free(broker, clock, postgres):
    add_node(broker, "dead-node")
    (task,) = lease_to(broker, "dead-node", 1)
    rescuer = Rescuer(broker)

    first, second = two_passes(broker, clock, rescuer)

    assert first["nodes_rescued"] == 0  # free once: maybe a node reconnecting
    assert second == {"nodes_rescued": 1, "released": 1}
    stored = reload(broker, task.id)
    assert (stored.state, stored.retried, stored.suspect, stored.lease_holder) == (State.PENDING, 0, False, "")
    assert stored.due_at <= clock.now()  # due at once
    assert not Node.objects.using(broker.db).filter(id="dead-node").exists()


def test_a_dead_nodes_tasks_become_no_suspects_and_a_suspect_among_them_is_not_charged(broker, clock, postgres):
    add_node(broker, "dead-node")
    tasks = lease_to(broker, "dead-node", 3)
    Task.objects.using(broker.db).filter(id=tasks[0].id).update(suspect=True)  # in flight in an earlier crash

    _, report = two_passes(broker, clock, Rescuer(broker))

    assert report == {"nodes_rescued": 1, "released": 3}
    stored = [reload(broker, t.id) for t in tasks]
    assert [(s.state, s.retried) for s in stored] == [(State.PENDING, 0)] * 3
    assert [s.suspect for s in stored] == [True, False, False]  # none made one; the flag stays for good


def test_a_node_holding_its_lock_or_recording_no_key_is_not_rescued(broker, clock, postgres, hold_lock):
    add_node(broker, "slow-node")
    hold_lock("slow-node")  # alive, however slow: its session holds the lock
    add_node(broker, "old-node", keyed=False)  # holds no lock at all (an earlier version)
    kept = lease_to(broker, "slow-node", 1) + lease_to(broker, "old-node", 1)
    rescuer = Rescuer(broker)

    reports = [*two_passes(broker, clock, rescuer), rescuer.run_once()]

    assert [r["nodes_rescued"] for r in reports] == [0, 0, 0]
    assert {reload(broker, t.id).state for t in kept} == {State.ACTIVE}
    assert Node.objects.using(broker.db).count() == 2


def test_the_rescuers_own_node_is_never_taken_for_dead(broker, clock, postgres):
    add_node(broker, "me")  # its lock connection may be reconnecting
    (task,) = lease_to(broker, "me", 1)

    reports = two_passes(broker, clock, Rescuer(broker, node=type("N", (), {"id": "me"})()))

    assert [r["nodes_rescued"] for r in reports] == [0, 0]
    assert reload(broker, task.id).state == State.ACTIVE


def test_a_lock_taken_again_before_the_confirmation_saves_the_node(broker, clock, postgres, hold_lock):
    add_node(broker, "blip-node")
    (task,) = lease_to(broker, "blip-node", 1)
    rescuer = Rescuer(broker)
    rescuer.run_once()  # free: its lock connection dropped a moment ago
    hold_lock("blip-node")  # ... and it took the lock again
    clock.advance(cluster.DEATH_CONFIRM)

    assert rescuer.run_once()["nodes_rescued"] == 0
    assert reload(broker, task.id).state == State.ACTIVE


def test_rescuing_a_node_withdraws_its_offers_and_releases_only_its_leases(broker, clock):
    # The broker's part, on both databases (SQLite never finds a node dead).
    Offer.objects.using(broker.db).create(queue="default", channel="c", lease_id="L.o0", holder="gone", expires_at=NOW)
    Offer.objects.using(broker.db).create(queue="default", channel="c", lease_id="L.o1", holder="other", expires_at=NOW)
    (task,) = lease_to(broker, "gone", 1)
    (other,) = lease_to(broker, "other", 1)

    assert broker.rescue_node("gone") == [task.id]
    assert list(Offer.objects.using(broker.db).values_list("holder", flat=True)) == ["other"]
    assert reload(broker, task.id).state == State.PENDING
    assert reload(broker, other.id).state == State.ACTIVE


def test_a_dead_nodes_tasks_keep_their_place_in_line(broker, clock):
    # Leased from the head of the queue, they go back to it: ahead of the
    # tasks enqueued while the node held them, not behind that backlog.
    held = [enqueue(broker) for _ in range(2)]
    assert [t.id for t in broker.lease("default", 2, holder="gone").tasks] == [t.id for t in held]
    clock.advance(1)
    later = enqueue(broker)
    clock.advance(1)

    broker.rescue_node("gone")

    assert [lease_one(broker).id for _ in range(3)] == [*(t.id for t in held), later.id]
    assert [reload(broker, t.id).due_at for t in held] == [t.due_at for t in held]


def test_a_rescue_records_each_attempt_released_by_the_node_with_no_retry_spent(broker, clock):
    (task,) = lease_to(broker, "gone", 1)

    broker.rescue_node("gone")

    (attempt,) = broker.task_attempts(task.id)
    assert (attempt.outcome, attempt.error, attempt.node) == ("released", NODE_LOST, "gone")
    assert reload(broker, task.id).retried == 0


def test_a_task_canceled_while_a_dead_node_held_it_is_archived(broker, clock):
    (task,) = lease_to(broker, "gone", 1)
    broker.cancel_task(task.id)  # running: the worker is asked to stop it

    assert broker.rescue_node("gone") == [task.id]
    assert reload(broker, task.id).state == State.ARCHIVED


def test_sqlite_finds_no_node_dead(broker, clock):
    if connections[broker.db].vendor != "sqlite":
        pytest.skip("the embedded database")
    add_node(broker, "dead-node")
    lease_to(broker, "dead-node", 1)

    assert broker.dead_nodes("") == []


def test_a_task_a_webhook_endpoint_accepted_is_left_to_it_by_a_rescue(broker, clock):
    accepted, delivered = lease_to(broker, "gone", 2)

    assert broker.hand_over(accepted.id, accepted.lease_id, "hooks") is True

    assert broker.rescue_node("gone") == [delivered.id]  # the node's only task now: the endpoint has the other
    stored = reload(broker, accepted.id)
    assert (stored.state, stored.lease_id, stored.lease_holder) == (State.ACTIVE, accepted.lease_id, "webhook:hooks")
    assert broker.hand_over(delivered.id, delivered.lease_id, "hooks") is False  # its lease is gone
