"""Leasers racing each other: no double delivery, exact per-key limits, exact rate limits.

The threaded tests need real row locks and concurrent transactions, so they
run on PostgreSQL only (SQLite serializes every writer). Each thread uses
its own database connection and closes it when done.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connections

from conveyor.broker import TaskSpec
from conveyor.states import State

THREADS = 8
MAX_ROUNDS = 5000  # a guard against a hung worker loop, far above what the tests need


def run_threads(target: Callable[[int], None], count: int = THREADS) -> list[BaseException]:
    """Run *target(i)* in *count* threads started together; return their errors."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a leaser thread hung"
    return errors


def enqueue_many(broker, specs: list[TaskSpec]) -> None:
    for start in range(0, len(specs), 1000):
        results = broker.enqueue_batch(specs[start : start + 1000])
        assert all(r.ok for r in results)


def test_concurrent_leasers_never_deliver_a_task_twice(broker, db_alias):
    if db_alias != "postgres":
        pytest.skip("needs concurrent transactions with row locks (PostgreSQL)")
    enqueue_many(broker, [TaskSpec(type="t", queue="race") for _ in range(500)])
    delivered: list[list[str]] = [[] for _ in range(THREADS)]

    def leaser(i: int) -> None:
        for _ in range(MAX_ROUNDS):
            batch = broker.lease("race", 7, holder=f"w{i}")
            delivered[i].extend(t.id for t in batch.tasks)
            if not batch.tasks and not broker.tasks.filter(queue="race", state=State.PENDING).exists():
                return

    errors = run_threads(leaser)

    assert errors == []
    ids = [tid for per_thread in delivered for tid in per_thread]
    assert len(ids) == 500
    assert len(set(ids)) == 500
    assert broker.tasks.filter(queue="race", state=State.ACTIVE).count() == 500
    assert sum(1 for per_thread in delivered if per_thread) > 1, "the leasers did not actually overlap"


def test_concurrent_leasers_never_exceed_a_per_key_limit(broker, db_alias):
    if db_alias != "postgres":
        pytest.skip("needs concurrent transactions with row locks (PostgreSQL)")
    limit = 2
    keys = ["k1", "k2", "k3"]
    broker.set_concurrency_limit("limited", limit)
    enqueue_many(broker, [TaskSpec(type="t", queue="limited", concurrency_key=k) for k in keys for _ in range(25)])
    enqueue_many(broker, [TaskSpec(type="t", queue="limited") for _ in range(20)])

    lock = threading.Lock()
    in_hand: Counter[str] = Counter()  # leased and not yet acked, per key
    peak: Counter[str] = Counter()
    db_peak: Counter[str] = Counter()
    done: list[str] = []

    def active_per_key() -> dict[str, int]:
        rows = broker.tasks.filter(queue="limited", state=State.ACTIVE, concurrency_key__isnull=False)
        return Counter(rows.values_list("concurrency_key", flat=True))

    def leaser(i: int) -> None:
        held = []
        for _ in range(MAX_ROUNDS):
            batch = broker.lease("limited", 3, holder=f"w{i}")
            # Counted after the lease committed and uncounted before the ack
            # starts, so in_hand never exceeds what is really active.
            with lock:
                for t in batch.tasks:
                    if t.concurrency_key:
                        in_hand[t.concurrency_key] += 1
                        peak[t.concurrency_key] = max(peak[t.concurrency_key], in_hand[t.concurrency_key])
            for key, n in active_per_key().items():
                with lock:
                    db_peak[key] = max(db_peak[key], n)
            # Hold this round's tasks while leasing the next round.
            for t in held:
                with lock:
                    if t.concurrency_key:
                        in_hand[t.concurrency_key] -= 1
                broker.ack(t.id, t.lease_id)
                with lock:
                    done.append(t.id)
            held = batch.tasks
            if not held and not broker.tasks.filter(queue="limited", state__in=[State.PENDING, State.ACTIVE]).exists():
                return

    errors = run_threads(leaser)

    assert errors == []
    assert len(done) == len(set(done)) == 95
    assert max(peak.values()) <= limit, peak
    assert max(db_peak.values()) <= limit, db_peak
    assert max(db_peak.values()) == limit, "the limit was never reached: the test did not exercise it"


def test_rate_limit_10_per_second_burst_1_leases_exactly_the_tokens_of_a_minute(broker, clock):
    broker.set_rate_limit("metered", 10, burst=1)
    enqueue_many(broker, [TaskSpec(type="t", queue="metered") for _ in range(700)])
    leased = len(broker.lease("metered", 100).tasks)  # the full bucket: one token

    for step in range(600):  # a simulated minute in 100 ms steps: one token each
        clock.advance(0.1)
        batch = broker.lease("metered", 100)
        leased += len(batch.tasks)
        assert len(batch.tasks) == 1, step
        assert batch.throttled == "rate"
        if step % 100 == 0:  # spot check: no second token at the same instant
            assert broker.lease("metered", 100).tasks == []

    assert leased == 1 + 600
    assert broker.tasks.filter(queue="metered", state=State.ACTIVE).count() == 601
