"""Broker throughput on SQLite and PostgreSQL (a script, not a test).

    .venv/bin/python bench/broker_bench.py [--backends sqlite,postgres] [--tasks 5000]

Prints, per database: enqueue one-by-one tasks/s, enqueue batch tasks/s,
and lease+ack tasks/s at batch sizes 1, 10 and 100. Every operation is a
real committed transaction through the broker (the same code a node runs).

With PostgreSQL in the run, a last row ("raw-sql") does the same work with
hand-written SQL on a minimal jobs table through psycopg: one INSERT per
commit, a 1,000-row INSERT, and SKIP LOCKED lease + ack UPDATEs. It is the
floor the broker is measured against, on the same machine in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, fresh_database, one_by_one_round, rate, timed


def workload(
    tasks: int, enqueue_one: Callable[[], None], enqueue_thousand: Callable[[], None], lease_ack: Callable[[int], int]
) -> dict[str, float]:
    """Time the same steps for any implementation of them.

    ``lease_ack(size)`` leases up to *size* tasks, acks them and returns how
    many it got (0 when the queue is empty).
    """
    results: dict[str, float] = {}

    def one_by_one() -> int:
        n = min(tasks, 2000)
        for _ in range(n):
            enqueue_one()
        return n

    def batched() -> int:
        for _ in range(tasks // 1000):
            enqueue_thousand()
        return tasks // 1000 * 1000

    for name, step in (("enqueue_one", one_by_one), ("enqueue_batch", batched)):
        count, seconds = timed(step)
        results[name] = count / seconds
    for size in (1, 10, 100):
        budget = min(tasks, 1000 if size == 1 else 3000)

        def drain(size: int = size, budget: int = budget) -> int:
            done = 0
            while done < budget:
                got = lease_ack(size)
                if not got:
                    break
                done += got
            return done

        count, seconds = timed(drain)
        results[f"lease_ack_{size}"] = count / seconds
    return results


def run_round(count: int) -> dict[str, float]:
    """One of bench/compare.py's interleaved rounds: *count* one-by-one enqueues
    from Django code through the process's broker (as ``run_inner``'s), from
    an empty task table and back to one."""
    import django

    django.setup()
    from django.db import connection

    from conveyor.broker import TaskSpec, get_broker

    broker = get_broker()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE conveyor_task CASCADE")
    per_s = one_by_one_round(lambda: broker.enqueue(TaskSpec(type="bench", payload=b"{}", queue="one")), count)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE conveyor_task CASCADE")
    return {"per_s": per_s}


def run_inner(tasks: int, process_broker: bool = False) -> dict[str, float]:
    """*process_broker*: the process's broker (``get_broker()``) as a Django
    producer has it, with its wakes and events through the channel layer;
    else the broker alone, with no hooks."""
    import django

    django.setup()
    from conveyor.broker import Broker, TaskSpec, get_broker
    from conveyor.notify.hooks import BrokerHooks

    broker = get_broker() if process_broker else Broker(hooks=BrokerHooks())

    def lease_ack(size: int) -> int:
        leased = broker.lease("lease", size).tasks
        if leased:
            broker.ack_many([(t, None) for t in leased])
        return len(leased)

    return workload(
        tasks,
        lambda: broker.enqueue(TaskSpec(type="bench", payload=b"{}", queue="one")),
        lambda: broker.enqueue_batch([TaskSpec(type="bench", payload=b"{}", queue="lease") for _ in range(1000)]),
        lease_ack,
    )


RAW_SCHEMA = """
CREATE TABLE raw_jobs (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    priority int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    payload bytea NOT NULL,
    attempt int NOT NULL DEFAULT 0
);
CREATE INDEX raw_jobs_due ON raw_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
"""

RAW_LEASE = """
UPDATE raw_jobs SET state = 'active', attempt = attempt + 1
WHERE id IN (
    SELECT id FROM raw_jobs WHERE queue = %s AND state = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING id
"""


def run_raw(url: str, tasks: int) -> dict[str, float]:
    """The same workload in plain SQL: the reference the broker is held to."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_SCHEMA)

        def enqueue_thousand() -> None:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO raw_jobs (queue, payload) SELECT * FROM unnest(%s::text[], %s::bytea[])",
                    (["lease"] * 1000, [b"{}"] * 1000),
                )

        def lease_ack(size: int) -> int:
            ids = [row[0] for row in conn.execute(RAW_LEASE, ("lease", size)).fetchall()]
            if ids:
                conn.execute("UPDATE raw_jobs SET state = 'completed' WHERE id = ANY(%s)", (ids,))
            return len(ids)

        return workload(
            tasks,
            lambda: conn.execute("INSERT INTO raw_jobs (queue, payload) VALUES ('one', '{}')"),
            enqueue_thousand,
            lease_ack,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tasks", type=int, default=10000)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--process-broker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.round is not None:
        print(json.dumps(run_round(args.round)))
        return
    if args.inner:
        print(json.dumps(run_inner(args.tasks, args.process_broker)))
        return
    rows = []
    for backend in args.backends.split(","):
        url = fresh_database(backend)
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "conveyor_site.settings"}
        out = subprocess.run(
            [sys.executable, __file__, "--inner", "--tasks", str(args.tasks)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append((backend, json.loads(out.stdout.strip().splitlines()[-1])))
        if backend == "postgres":
            rows.append(("raw-sql", run_raw(fresh_database("postgres", "conveyor_bench_raw"), args.tasks)))
    columns = ["enqueue_one", "enqueue_batch", "lease_ack_1", "lease_ack_10", "lease_ack_100"]
    print(f"{'backend':10}" + "".join(f"{c:>16}" for c in columns))
    for backend, result in rows:
        print(f"{backend:10}" + "".join(f"{rate(int(result[c]), 1.0):>16}" for c in columns))


if __name__ == "__main__":
    main()
