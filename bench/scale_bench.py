"""Lease + ack cost as the queue grows: 10k, 100k and 1M waiting tasks (a script, not a test).

    .venv/bin/python bench/scale_bench.py [--sizes 10000,100000,1000000] [--cycles 2000]

Starts a PostgreSQL of its own (``initdb`` on /dev/shm, a free port), and
for each layout -- every waiting task in one queue, or spread over 100
queues -- fills the task table up to each size with pending tasks (one
INSERT ... SELECT, then VACUUM ANALYZE, as autovacuum would), leaves as
many completed tasks beside them with one attempt each (the history a
node keeps for its retention), and runs *cycles* lease-one + ack-one
rounds the way a node does: ``LoopLeaser.lease`` and ``LoopLeaser.ack`` on
the node's own connections (prepared statements, generic plans). With 100
queues the rounds go round the queues. Prints, per layout and size, the
median and p95 milliseconds of a round and PostgreSQL's shared buffers
touched per round (``pg_stat_database``; it does not depend on how busy
the machine is). A flat curve is the goal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.chaos_rig import private_database

LAYOUTS = {"one queue": 1, "100 queues": 100}
FILL = """
INSERT INTO conveyor_task (id, queue, type, state, priority, payload, content_type, metadata, max_retry, retried,
    last_error, retry_kind, due_at, enqueued_at, updated_at, lease_holder, progress, progress_message,
    cancel_requested, suspect, has_dependents, finished_at, purge_at)
SELECT %(prefix)s || lpad(i::text, 8, '0'), 'q' || (i %% %(queues)s), 'bench:task', %(state)s,
    4, convert_to(json_build_object('n', i)::text, 'UTF8'), 'application/json', '{}'::jsonb, 25, 0,
    '', '', now() - interval '1 hour', now(), now(), '', 0, '', false, false, false,
    CASE WHEN %(state)s = 'completed' THEN now() END, CASE WHEN %(state)s = 'completed' THEN now() + interval '7 days' END
FROM generate_series(%(low)s, %(high)s) AS i
"""
HISTORY = """
INSERT INTO conveyor_taskattempt (task_id, number, started_at, finished_at, worker_session, worker_labels, node,
    outcome, error)
SELECT 'done-' || lpad(i::text, 8, '0'), 1, now(), now(), 's', '{}'::jsonb, 'n', 'completed', ''
FROM generate_series(%(low)s, %(high)s) AS i
"""

RESET = """
WITH again AS (
    UPDATE conveyor_task SET state = 'pending', lease_id = NULL, lease_holder = '', lease_expires_at = NULL,
        started_at = NULL, finished_at = NULL, purge_at = NULL, result = NULL, progress = 0
    WHERE id LIKE 'wait-%%' AND state = 'completed' RETURNING id)
DELETE FROM conveyor_taskattempt WHERE task_id IN (SELECT id FROM again)
"""


def buffers(cursor) -> int:  # type: ignore[no-untyped-def]
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute("SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()")
    return int(cursor.fetchone()[0])


def run(sizes: list[int], cycles: int) -> None:
    import django

    django.setup()
    from django.db import connection

    from conveyor.broker import Broker
    from conveyor.dispatch.loop_lease import LoopLeaser

    broker = Broker()
    rows = []
    for layout, queues in LAYOUTS.items():
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE conveyor_task, conveyor_taskattempt, conveyor_taskdependency")
        filled = 0
        for size in sizes:
            start = time.perf_counter()
            with connection.cursor() as cursor:
                for low in range(filled + 1, size + 1, 100_000):
                    high = min(low + 99_999, size)
                    for prefix, state in (("wait-", "pending"), ("done-", "completed")):
                        cursor.execute(FILL, {"prefix": prefix, "queues": queues, "state": state,
                                              "low": low, "high": high})  # fmt: skip
                    cursor.execute(HISTORY, {"low": low, "high": high})
                cursor.execute("VACUUM ANALYZE conveyor_task")
                cursor.execute("VACUUM ANALYZE conveyor_taskattempt")
            filled = size
            print(
                f"{layout}: {size:,} waiting (+ {size:,} completed) in {time.perf_counter() - start:.0f} s", flush=True
            )

            with connection.cursor() as cursor:
                samples, used = asyncio.run(rounds(LoopLeaser(broker, size=2), queues, cycles, cursor))
            samples.sort()
            rows.append((layout, size, statistics.median(samples), samples[int(len(samples) * 0.95)], used / cycles))
            print(f"  {rows[-1][2]:.2f} ms median, {rows[-1][3]:.2f} ms p95, {rows[-1][4]:.0f} buffers per round",
                  flush=True)  # fmt: skip
            # Back to the size it had: the rounds completed *cycles* waiting tasks.
            with connection.cursor() as cursor:
                cursor.execute(RESET, [])

    print(f"\nlease one + ack one on the node's connections, {cycles:,} rounds (PostgreSQL)")
    print("| layout | waiting tasks | median (ms) | p95 (ms) | buffers per round |")
    print("|---|---:|---:|---:|---:|")
    for layout, size, median, p95, used in rows:
        print(f"| {layout} | {size:,} | {median:.2f} | {p95:.2f} | {used:.0f} |")


async def rounds(leaser, queues: int, cycles: int, cursor) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    samples = []
    try:
        for k in range(50):  # warm: connections, prepared statements
            await one_round(leaser, f"q{k % queues}")
        before = buffers(cursor)
        for k in range(cycles):
            start = time.perf_counter()
            await one_round(leaser, f"q{k % queues}")
            samples.append((time.perf_counter() - start) * 1000)
        used = buffers(cursor) - before
    finally:
        await leaser.close()
    return samples, used


async def one_round(leaser, queue: str) -> None:  # type: ignore[no-untyped-def]
    batch = await leaser.lease(queue, 1, "bench-holder")
    if batch is None or not batch.tasks:
        raise RuntimeError(f"nothing leased from {queue}")
    lost = await leaser.ack([(task, None) for task in batch.tasks])
    if lost:
        raise RuntimeError(f"acks lost: {lost}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    with private_database("conveyor_scale"):
        run([int(s) for s in args.sizes.split(",")], args.cycles)


if __name__ == "__main__":
    main()
