"""Search inside tasks on 1M rows of PostgreSQL, with and without its indexes (a script, not a test).

    .venv/bin/python bench/search_bench.py [--rows 1000000] [--repeat 15]

Starts a PostgreSQL of its own (``initdb`` on /dev/shm, a free port),
migrates it, fills the task table with *rows* tasks by one INSERT ... SELECT
(JSON payloads ``{"user_id": i %% 100000, "order": {"id": i}}``, metadata
``{"tenant": "t<i % 50>", "batch": "b<i % 1000>"}``), and times the task
list's first page through the broker (``list_tasks``, the code the API and
the dashboard call) for a payload search that matches 10 tasks, a nested one
that matches one, a metadata search that matches 1,000 (a full page of
50), both together, a payload value a quarter of the rows hold, and a
substring (``contains``, never indexed). Then it drops the indexes of migration 0008 and times the same queries.
Last, the cost of the indexes on enqueue: 20,000 tasks in batches of 1,000
through the broker, with and without them. Prints medians in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.chaos_rig import private_database

QUERIES = {
    "payload.user_id = 4242 (10 hits)": {"where": "payload.user_id = 4242"},
    "payload.order.id = 777777 (1 hit)": {"where": "payload.order.id = 777777"},
    "metadata.batch = b7 (1,000 hits)": {"where": "metadata.batch = b7"},
    "metadata + payload (10 hits)": {"where": "metadata.tenant = t42 and payload.user_id = 4242"},
    "payload.kind = k1 (250,000 hits)": {"where": "payload.kind = k1"},
    'contains ": 777777}" (1 hit)': {"contains": ": 777777}"},
}
FILL = """
INSERT INTO conveyor_task (id, queue, type, state, priority, payload, content_type, metadata, max_retry, retried,
    last_error, retry_kind, due_at, enqueued_at, updated_at, lease_holder, progress, progress_message,
    cancel_requested, suspect, has_dependents, finished_at, purge_at)
SELECT 'bench-' || lpad(i::text, 8, '0'), 'q' || (i %% 4), 'bench:task', CASE WHEN i %% 10 = 0 THEN 'pending' ELSE 'completed' END,
    4, convert_to(json_build_object('user_id', i %% 100000, 'order', json_build_object('id', i), 'kind', 'k' || (i %% 4))::text, 'UTF8'),
    'application/json', jsonb_build_object('tenant', 't' || (i %% 50), 'batch', 'b' || (i %% 1000)), 25, 0,
    '', '', now(), now(), now(), '', 0, '', false, false, false,
    CASE WHEN i %% 10 = 0 THEN NULL ELSE now() END, CASE WHEN i %% 10 = 0 THEN NULL ELSE now() + interval '7 days' END
FROM generate_series(%s, %s) AS i
"""
INDEXES = ("task_payload_search", "task_metadata_search")


def median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm: plan cache, buffers
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--explain", action="store_true", help="print each query's plan too")
    args = parser.parse_args()
    with private_database("conveyor_search"):
        run(args.rows, args.repeat, args.explain)


def run(rows: int, repeat: int, explain: bool) -> None:
    import django

    django.setup()
    from django.db import connection

    from conveyor.broker import Broker, TaskSpec
    from conveyor.broker.filters import parse_filter

    broker = Broker()
    start = time.perf_counter()
    with connection.cursor() as cursor:
        step = 100_000
        for low in range(1, rows + 1, step):
            cursor.execute(FILL, [low, min(low + step - 1, rows)])
        cursor.execute("VACUUM ANALYZE conveyor_task")
    print(f"filled {rows:,} rows in {time.perf_counter() - start:.0f} s")

    def enqueue_cost() -> float:
        specs = [TaskSpec(type="bench:new", queue="new", payload=b'{"user_id": 1, "n": 2}', metadata={"tenant": "x"})
                 for _ in range(1000)]  # fmt: skip
        start = time.perf_counter()
        for _ in range(20):
            broker.enqueue_batch(specs)
        return 20_000 / (time.perf_counter() - start)

    results: dict[str, list[float]] = {}
    for label, params in QUERIES.items():
        if explain:
            query = broker.filtered(parse_filter(params)).order_by("-id")[:50]
            print(label, "\n", query.explain(analyze=True))
        hits = len(broker.list_tasks(limit=50, **params).tasks)
        results[label] = [median_ms(lambda p=params: broker.list_tasks(limit=50, **p), repeat)]
        results[label].append(hits)
    with_index_rate = enqueue_cost()
    with connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"DROP INDEX {name}")
        cursor.execute("ANALYZE conveyor_task")
    for label, params in QUERIES.items():
        results[label].insert(1, median_ms(lambda p=params: broker.list_tasks(limit=50, **p), max(3, repeat // 3)))
    without_index_rate = enqueue_cost()

    print(f"\nfirst page (50) of list_tasks on {rows:,} rows, PostgreSQL, median ms")
    print(f"| {'search':<36} | {'with index':>10} | {'without':>10} | {'rows shown':>10} |")
    print(f"|{'-' * 38}|{'-' * 12}|{'-' * 12}|{'-' * 12}|")
    for label, (with_ms, without_ms, hits) in results.items():
        print(f"| {label:<36} | {with_ms:>10.1f} | {without_ms:>10.1f} | {hits:>10.0f} |")
    print(f"\nenqueue, batches of 1,000: {with_index_rate:,.0f} tasks/s with the indexes, "
          f"{without_index_rate:,.0f} tasks/s without")  # fmt: skip


if __name__ == "__main__":
    main()
