"""An enqueue takes a node's offer in its INSERT: the task is stored leased and the node is notified.

Real PostgreSQL. The test plays the node: it places offer rows as a node
does and LISTENs on the offer's channel from a session of its own, then
looks at what an enqueue from Django code (hooks whose wake is a round
trip, as a producer's on Redis) stored, deleted and sent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction

from conveyor.broker import Broker, TaskSpec
from conveyor.broker.offers import BODY_MAX, MISS_PAUSE, Take, offered_task
from conveyor.dispatch.loop_lease import LoopLeaser
from conveyor.dispatch.offers import WITHDRAW
from conveyor.models import Offer, Queue, Task
from conveyor.notify.hooks import RecordingHooks
from conveyor.states import State
from conveyor.store import task_columns
from conveyor.store.postgres import insert_sql
from tests.broker.factories import on_loop

pytestmark = pytest.mark.parametrize("db_alias", ["postgres"], indirect=True)

CHANNEL = "conveyor_offers_test"
HOLDER = "node-a"


class ProducerHooks(RecordingHooks):
    reaches_other_processes = True  # as a producer's hooks on Redis


@pytest.fixture
def producer(db_alias: str, clock: Any) -> tuple[Broker, ProducerHooks]:
    hooks = ProducerHooks()
    return Broker(clock=clock, using=db_alias, hooks=hooks), hooks


@pytest.fixture
def listener(db_alias: str) -> Iterator[psycopg.Connection[Any]]:
    params = connections[db_alias].get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(f'LISTEN "{CHANNEL}"')
        yield conn


def offer(alias: str, clock: Any, lease_id: str, *, queue: str = "email", ttl: float = 15.0) -> None:
    Offer.objects.using(alias).create(
        queue=queue, channel=CHANNEL, lease_id=lease_id, holder=HOLDER, expires_at=clock.now() + timedelta(seconds=ttl)
    )


def notes(conn: psycopg.Connection[Any]) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=0.5, stop_after=1)]


def test_a_due_task_takes_an_offer_and_its_node_is_notified_with_the_task(db_alias, clock, producer, listener):
    broker, hooks = producer
    offer(db_alias, clock, "lease-1")
    spec = TaskSpec(type="email:send", queue="email", payload=b"\x00\xffbin", metadata={"who": "\u00e9l\u00e8ve"})

    task = broker.enqueue(spec)

    row = Task.objects.using(db_alias).get(id=task.id)
    assert (row.state, row.lease_id, row.lease_holder) == (State.ACTIVE, "lease-1", HOLDER)
    assert row.started_at == clock.now() and row.lease_expires_at > clock.now()
    assert (task.state, task.lease_id, task.lease_holder) == (State.ACTIVE, "lease-1", HOLDER)
    assert not Offer.objects.using(db_alias).exists()  # taken: gone
    assert hooks.wakes == []  # its node has it: nobody to wake
    assert [e.kind for e in hooks.events] == ["enqueued"]
    [payload] = notes(listener)
    sent = offered_task(payload, HOLDER)
    for name in ("id", "queue", "type", "state", "payload", "metadata", "due_at", "lease_id", "lease_holder"):
        assert getattr(sent, name) == getattr(row, name), name
    assert sent.lease_expires_at == row.lease_expires_at and sent.started_at == row.started_at


def test_with_no_offer_the_task_is_pending_and_woken_for(db_alias, clock, producer, listener):
    broker, hooks = producer
    offer(db_alias, clock, "lease-1", queue="other")

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert Task.objects.using(db_alias).get(id=task.id).state == State.PENDING
    assert task.lease_id is None
    assert hooks.woken() == {"email"}
    assert Offer.objects.using(db_alias).count() == 1
    assert notes(listener) == []


def test_offers_are_taken_oldest_first(db_alias, clock, producer, listener):
    broker, _ = producer
    offer(db_alias, clock, "lease-1")
    offer(db_alias, clock, "lease-2")

    first = broker.enqueue(TaskSpec(type="t", queue="email"))
    second = broker.enqueue(TaskSpec(type="t", queue="email"))
    third = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert [first.lease_id, second.lease_id, third.lease_id] == ["lease-1", "lease-2", None]
    assert [n.partition(" ")[0] for n in notes(listener) + notes(listener)] == ["lease-1", "lease-2"]


def test_after_a_miss_the_queue_looks_for_no_offer_until_the_pause_is_over(db_alias, clock, producer, listener):
    broker, hooks = producer
    missed = broker.enqueue(TaskSpec(type="t", queue="email"))  # nothing to take yet
    offer(db_alias, clock, "lease-1")
    offer(db_alias, clock, "lease-s", queue="sms")

    clock.advance(MISS_PAUSE.total_seconds() / 2)
    paused = broker.enqueue(TaskSpec(type="t", queue="email"))
    other = broker.enqueue(TaskSpec(type="t", queue="sms"))  # another queue's takes go on
    clock.advance(MISS_PAUSE.total_seconds())
    after = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert (missed.state, paused.state) == (State.PENDING, State.PENDING)
    assert [queue for queue, _ in hooks.wakes] == ["email", "email"]  # the takes: no wake
    assert Task.objects.using(db_alias).get(id=paused.id).state == State.PENDING
    assert (other.state, other.lease_id) == (State.ACTIVE, "lease-s")
    assert (after.state, after.lease_id) == (State.ACTIVE, "lease-1")
    assert [n.partition(" ")[0] for n in notes(listener) + notes(listener)] == ["lease-s", "lease-1"]


def test_a_nodes_own_enqueue_pauses_after_a_miss_too(db_alias, clock, listener):
    broker = Broker(clock=clock, using=db_alias, hooks=RecordingHooks())  # the node's: one for its leasers

    def enqueue() -> Task:
        return on_loop(LoopLeaser(broker), lambda leaser: leaser.enqueue(TaskSpec(type="t", queue="email"))).task

    missed = enqueue()
    offer(db_alias, clock, "lease-1")
    paused = enqueue()
    clock.advance(MISS_PAUSE.total_seconds())
    after = enqueue()

    assert (missed.state, paused.state) == (State.PENDING, State.PENDING)
    assert (after.state, after.lease_id) == (State.ACTIVE, "lease-1")


def test_a_take_that_finds_an_offer_does_not_pause_its_queue(db_alias, clock, producer, listener):
    broker, _ = producer
    offer(db_alias, clock, "lease-1")
    offer(db_alias, clock, "lease-2")

    first = broker.enqueue(TaskSpec(type="t", queue="email"))
    second = broker.enqueue(TaskSpec(type="t", queue="email"))  # same instant

    assert [first.lease_id, second.lease_id] == ["lease-1", "lease-2"]


def test_an_expired_offer_is_not_taken(db_alias, clock, producer, listener):
    broker, _ = producer
    offer(db_alias, clock, "lease-1", ttl=1.0)
    clock.advance(2.0)

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert task.state == State.PENDING
    assert Offer.objects.using(db_alias).count() == 1


@pytest.mark.parametrize(
    "settings",
    [{"paused": True}, {"rate": 5.0}, {"concurrency_limit": 2}, {"policy": "random"}],
    ids=["paused", "rate limit", "concurrency limit", "random order"],
)
def test_a_queue_whose_lease_has_rules_to_honour_takes_no_offer(db_alias, clock, producer, listener, settings):
    broker, hooks = producer
    Queue.objects.using(db_alias).create(name="email", **settings)
    offer(db_alias, clock, "lease-1")

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert Task.objects.using(db_alias).get(id=task.id).state == State.PENDING
    assert Offer.objects.using(db_alias).count() == 1
    assert hooks.woken() == {"email"}
    assert notes(listener) == []


def test_a_task_too_large_for_a_notification_takes_no_offer(db_alias, clock, producer, listener):
    broker, _ = producer
    offer(db_alias, clock, "lease-1")

    task = broker.enqueue(TaskSpec(type="t", queue="email", payload=b"x" * BODY_MAX))

    assert Task.objects.using(db_alias).get(id=task.id).state == State.PENDING
    assert Offer.objects.using(db_alias).count() == 1


@pytest.mark.parametrize(
    "fields",
    [{"id": "mine-1"}, {"unique_key": "u"}, {"process_in": 60.0}, {"group": "g"}],
    ids=["own id", "unique key", "scheduled", "group"],
)
def test_tasks_that_are_not_one_due_insert_take_no_offer(db_alias, clock, producer, listener, fields):
    broker, _ = producer
    offer(db_alias, clock, "lease-1")

    task = broker.enqueue(TaskSpec(type="t", queue="email", **fields))

    assert Task.objects.using(db_alias).get(id=task.id).state != State.ACTIVE
    assert Offer.objects.using(db_alias).count() == 1


def test_in_a_callers_transaction_no_offer_is_taken(db_alias, clock, producer, listener):
    broker, _ = producer
    offer(db_alias, clock, "lease-1")

    with transaction.atomic(using=db_alias):
        task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert Task.objects.using(db_alias).get(id=task.id).state == State.PENDING
    assert Offer.objects.using(db_alias).count() == 1


def test_a_producer_with_nobody_to_wake_takes_no_offer(db_alias, clock, listener):
    broker = Broker(clock=clock, using=db_alias, hooks=RecordingHooks())  # reaching no other process
    offer(db_alias, clock, "lease-1")

    task = broker.enqueue(TaskSpec(type="t", queue="email"))

    assert task.state == State.PENDING
    assert Offer.objects.using(db_alias).count() == 1


def test_an_offer_a_node_is_withdrawing_is_not_taken_twice(db_alias, clock, producer, listener):
    # A node's withdraw deletes its offers; one locked by a producer's
    # statement is skipped by other producers and waits for the first.
    broker, _ = producer
    offer(db_alias, clock, "lease-1")
    params = connections[db_alias].get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params) as node:
        node.execute("SELECT 1 FROM conveyor_offer WHERE lease_id = 'lease-1' FOR UPDATE")

        task = broker.enqueue(TaskSpec(type="t", queue="email"))

        assert task.state == State.PENDING  # skipped the locked offer
        deleted = node.execute("DELETE FROM conveyor_offer WHERE lease_id = 'lease-1' RETURNING lease_id").fetchall()
        node.commit()
    assert deleted == [("lease-1",)]  # withdrawn: the credit is the node's again


def test_a_nodes_own_enqueue_takes_an_offer_too(db_alias, clock, listener):
    hooks = RecordingHooks()  # a node's: its wake is no round trip
    broker = Broker(clock=clock, using=db_alias, hooks=hooks)
    offer(db_alias, clock, "lease-1")

    result = on_loop(LoopLeaser(broker), lambda leaser: leaser.enqueue(TaskSpec(type="t", queue="email")))

    row = Task.objects.using(db_alias).get(id=result.task.id)
    assert (row.state, row.lease_id, row.lease_holder) == (State.ACTIVE, "lease-1", HOLDER)
    assert (result.task.state, result.task.lease_id) == (State.ACTIVE, "lease-1")
    assert hooks.wakes == []
    assert [n.partition(" ")[0] for n in notes(listener)] == ["lease-1"]
    assert not Offer.objects.using(db_alias).exists()


def _take(broker: Broker, clock: Any, **spec: Any) -> tuple[Take | None, list[Any]]:
    task = broker.one_insert_task(TaskSpec(type="t", queue="email", **spec))
    values = [getattr(task, attname) for _, attname in task_columns()]
    return Take.of(values, clock.now()), values


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_a_withdraw_waits_for_a_take_in_flight_and_gets_back_only_an_offer_not_taken(db_alias, clock, outcome):
    broker = Broker(clock=clock, using=db_alias, hooks=RecordingHooks())
    offer(db_alias, clock, "lease-1")
    params = connections[db_alias].get_connection_params()
    params.pop("cursor_factory", None)
    take, values = _take(broker, clock)
    assert take is not None
    withdrawn: list[Any] = []

    def withdraw() -> None:
        with psycopg.connect(**params, autocommit=True) as node:
            withdrawn.extend(node.execute(WITHDRAW, [["lease-1"]]).fetchall())

    with psycopg.connect(**params) as producer_conn:
        producer_conn.execute(insert_sql(take_offer=True), take.params(values))  # the take, not yet committed
        node = threading.Thread(target=withdraw)
        node.start()
        node.join(0.5)
        assert node.is_alive()  # the DELETE waits for the taker
        producer_conn.commit() if outcome == "commit" else producer_conn.rollback()
    node.join(10)

    if outcome == "commit":
        assert withdrawn == []  # taken: the node reads its task, and gets no credit back
        assert Task.objects.using(db_alias).get(lease_id="lease-1").state == State.ACTIVE
    else:
        assert withdrawn == [("lease-1",)]  # not taken after all: the credit is the node's again
        assert not Task.objects.using(db_alias).exists()


def test_the_largest_task_that_takes_an_offer_fits_in_a_notification(db_alias, clock, producer, listener):
    broker, _ = producer

    def takes(n: int) -> bool:
        take, _ = _take(broker, clock, payload=b"x" * n)
        return take is not None

    low, high = 0, BODY_MAX
    while low < high:  # the largest payload whose notification is at most BODY_MAX
        mid = (low + high + 1) // 2
        low, high = (mid, high) if takes(mid) else (low, mid - 1)
    offer(db_alias, clock, "lease-1")
    offer(db_alias, clock, "lease-2")

    largest = broker.enqueue(TaskSpec(type="t", queue="email", payload=b"x" * low))
    larger = broker.enqueue(TaskSpec(type="t", queue="email", payload=b"x" * (low + 3)))

    assert largest.lease_id == "lease-1"  # PostgreSQL took its notification
    [payload] = notes(listener)
    assert len(payload.encode()) < 8000
    assert offered_task(payload, HOLDER).payload == b"x" * low
    assert larger.state == State.PENDING


def test_the_reapers_purge_deletes_expired_offers_only(db_alias, clock):
    broker = Broker(clock=clock, using=db_alias, hooks=RecordingHooks())
    offer(db_alias, clock, "lease-old", ttl=1.0)
    offer(db_alias, clock, "lease-live", ttl=60.0)
    clock.advance(2.0)

    broker.purge()

    assert list(Offer.objects.using(db_alias).values_list("lease_id", flat=True)) == ["lease-live"]
