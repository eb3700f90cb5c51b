"""Conveyor side by side with Celery, RQ, Dramatiq, procrastinate and django-tasks-db, in one run.

    make bench-peers        # creates bench/.peers with the peers, then runs this
    .venv/bin/python bench/compare.py --slots 2,50 --rounds 3

Every system runs at each size in ``--slots`` (total worker slots: tasks
that may run at once), in its best configuration at that size:

  conveyor          one SDK worker process (AsyncWorker), concurrency SLOTS,
                    the SDK's default prefetch window (and one column per ``--conveyor-prefetch N``)
  celery-threads    Celery on Redis, ``-P threads -c SLOTS``
  celery-prefork    Celery on Redis, ``-P prefork -c SLOTS``
                    (both acks_late, prefetch multiplier at its default 4)
  rq                RQ's WorkerPool of SLOTS SimpleWorkers
  dramatiq          Dramatiq on Redis, processes x threads = SLOTS
  procrastinate     one worker, ``--concurrency SLOTS``
  django-tasks      django-tasks-db: SLOTS ``db_worker`` processes, polling
                    50 times a second between them when idle

Measured per system (no worker running): enqueue one by one and in bulk
through its client library (Conveyor: from Django code, and over HTTP
through the SDK's Client). Per system and size: the drain of ``--tasks``
no-op tasks queued beforehand, timed from the worker's start to the last
task done, with the whole machine's CPU per task (/proc/stat over the
drain) and the worker process tree's own (/proc/<pid>/stat), and its RSS;
then the enqueue -> start latency at ``--rate`` tasks/s from one producer
on its client library. The phases run in ``--rounds`` rounds; within a
round every system takes its turn at each phase, the first one rotating
from round to round, so a slow moment of the machine falls on all alike.
Rates and CPU are the median over the rounds; latency percentiles are over
the samples of all rounds.

Everything runs on loopback: a private redis-server for the Redis brokers,
Conveyor's channel layer and the tasks' counter (``--durable-redis``: the
brokers on a second one that fsyncs every write), and private databases on
the machine's PostgreSQL (``BENCH_POSTGRES_URL``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, latency_percentiles, percentile_rows, print_table, private_redis
from bench.dispatch_bench import Node
from conveyor.sdk.worker import DEFAULT_PREFETCH

PEERS_PYTHON = ROOT / "bench" / ".peers" / "bin" / "python"
LATENCY_WARMUP = 20  # unmeasured tasks at the start of each latency run


@dataclass
class System:
    name: str
    python: str
    script: str
    env: dict[str, str]
    variants: list[tuple[str, str]]  # (column, variant)
    note: str = ""  # why it is left out, when it is
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def run(self, *args: object, timeout: float = 3600) -> dict[str, Any] | None:
        argv = [self.python, str(ROOT / "bench" / self.script), *(str(a) for a in args)]
        try:
            out = subprocess.run(argv, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"{self.name} {args[0]}: timed out", file=sys.stderr)
            return None
        if out.returncode != 0:
            print(f"{self.name} {' '.join(map(str, args))} failed:\n{out.stderr[-3000:]}", file=sys.stderr)
            return None
        return json.loads(out.stdout.strip().splitlines()[-1])


def rotated(items: list[Any], r: int) -> list[Any]:
    """The items in round *r*'s order: each round starts with the next one."""
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def systems(args: argparse.Namespace, redis_url: str, broker_url: str, node: Node | None) -> list[System]:
    """The systems of the run, each with its driver's environment. Redis
    database numbers: 0 Conveyor's channel layer, 1 Celery, 2 RQ,
    3 Dramatiq (of the brokers' Redis), 15 the counter."""
    counter = redis_url.rsplit("/", 1)[0] + "/15"
    base = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_COUNTER_URL": counter}

    def broker(db: int) -> dict[str, str]:
        return {**base, "BENCH_REDIS_URL": broker_url.rsplit("/", 1)[0] + f"/{db}"}

    wanted = args.systems.split(",")
    out = []
    if "conveyor" in wanted and node is not None:
        variants = [("conveyor", f"p{DEFAULT_PREFETCH}")] + [(f"conveyor-p{n}", f"p{n}") for n in args.conveyor_prefetch]
        env = {**node.env, "PYTHONPATH": str(ROOT), "BENCH_COUNTER_URL": counter, "CONVEYOR_URL": node.url}
        out.append(System("conveyor", sys.executable, "compare_conveyor.py", env, variants))
    peers = [
        ("celery", "peers/celery_bench.py", broker(1), [("celery-threads", "threads"), ("celery-prefork", "prefork")]),
        ("rq", "peers/rq_bench.py", broker(2), [("rq", "simple")]),
        ("dramatiq", "peers/dramatiq_bench.py", broker(3), [("dramatiq", "procs")]),
        ("procrastinate", "peers/procrastinate_bench.py", base, [("procrastinate", "async")]),
        ("django-tasks", "peers/djtasks_bench.py", base, [("django-tasks", "procs")]),
    ]
    for name, script, env, variants in peers:
        variants = [v for v in variants if name in wanted or v[0] in wanted]
        if not variants:
            continue
        if not PEERS_PYTHON.exists():
            print(f"bench/.peers is missing: run `make bench-peers` to compare with {name}", file=sys.stderr)
            continue
        out.append(System(name, str(PEERS_PYTHON), script, env, variants))
    return out


def columns(run: list[System]) -> list[tuple[System, str, str]]:
    return [(s, column, variant) for s in run for column, variant in s.variants]


def median_row(samples: list[dict[str, Any]]) -> dict[str, float]:
    keys = {k for s in samples for k in s if k != "samples"}
    return {k: statistics.median(s[k] for s in samples if k in s) for k in keys}


def measure(args: argparse.Namespace, run: list[System]) -> dict[str, dict[str, float]]:
    """The rounds; returns the table's cells: by system (enqueue) and by
    ``column@slots`` (drain, latency)."""
    for system in run:
        if system.run("setup") is None:
            system.note = "its setup failed (see above)"
    run = [s for s in run if not s.note]
    enqueue: dict[str, list[dict[str, Any]]] = {s.name: [] for s in run}
    drain: dict[str, list[dict[str, Any]]] = {}
    latency: dict[str, list[float]] = {}
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}: enqueue", file=sys.stderr, flush=True)
        for system in rotated(run, r):
            if (row := system.run("enqueue", args.enqueue_tasks)) is not None:
                enqueue[system.name].append(row)
        for slots in args.slots:
            print(f"round {r + 1}: drain at {slots} slots", file=sys.stderr, flush=True)
            for system, column, variant in rotated(columns(run), r):
                if (row := system.run("drain", args.tasks, slots, variant)) is not None:
                    drain.setdefault(f"{column}@{slots}", []).append(row)
        for slots in args.slots:
            print(f"round {r + 1}: latency at {slots} slots", file=sys.stderr, flush=True)
            for system, column, variant in rotated(columns(run), r):
                row = system.run("latency", args.latency_tasks, args.rate, slots, variant, LATENCY_WARMUP)
                if row is not None:
                    latency.setdefault(f"{column}@{slots}", []).extend(row["samples"])
    cells: dict[str, dict[str, float]] = {name: median_row(rows) for name, rows in enqueue.items() if rows}
    for key, rows in drain.items():
        cells[key] = median_row(rows)
    for key, values in latency.items():
        cells.setdefault(key, {}).update(latency_percentiles(values, "lat") | {"lat_samples": len(values)})
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", default="2,50", help="worker slot counts, comma-separated (default 2,50)")
    parser.add_argument("--tasks", type=int, default=5000, help="no-op tasks per drain (default 5000)")
    parser.add_argument("--enqueue-tasks", type=int, default=2000, help="tasks per enqueue measurement (default 2000)")
    parser.add_argument("--rate", type=float, default=50.0, help="tasks/s of the latency runs (default 50)")
    parser.add_argument(
        "--latency-tasks", type=int, default=500, help="measured tasks per latency run and round (default 500)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument(
        "--systems",
        default="conveyor,celery,rq,dramatiq,procrastinate,django-tasks",
        help="systems or columns to run, comma-separated (celery-threads, celery-prefork: one of Celery's pools)",
    )
    parser.add_argument(
        "--conveyor-prefetch",
        default="",
        help="also run Conveyor's worker with Worker(prefetch=N), one column per N, comma-separated",
    )
    parser.add_argument(
        "--durable-redis", action="store_true", help="the Redis brokers on a private Redis that fsyncs every write"
    )
    parser.add_argument("--json", action="store_true", help="print the cells as JSON instead of tables")
    args = parser.parse_args()
    try:
        args.slots = [int(s) for s in args.slots.split(",")]
        args.conveyor_prefetch = [int(n) for n in args.conveyor_prefetch.split(",") if n]
    except ValueError:
        parser.error("--slots and --conveyor-prefetch take comma-separated integers")
    if any(s < 1 for s in args.slots) or args.rounds < 1 or args.tasks < 1:
        parser.error("--slots, --rounds and --tasks must be at least 1")

    with contextlib.ExitStack() as stack:
        redis_url = stack.enter_context(private_redis())
        broker_url = stack.enter_context(private_redis(fsync=True)) if args.durable_redis else redis_url
        node = None
        if "conveyor" in args.systems.split(","):
            node = Node("cluster", database="conveyor_compare", redis_url=redis_url)
            stack.callback(node.stop)
        run = systems(args, redis_url, broker_url, node)
        cells = measure(args, run)
    if args.json:
        print(json.dumps(cells, indent=2))
        return
    enqueue_cols = {s.name: cells.get(s.name, {}) for s in run if not s.note}
    print(f"\nenqueue, no worker running: median of {args.rounds} round(s) of {args.enqueue_tasks:,} tasks (tasks/s)")
    print_table(
        [
            ("one by one, client library", "one_per_s", "{:,.0f}"),
            ("bulk, client library", "bulk_per_s", "{:,.0f}"),
            ("one by one over HTTP, SDK Client", "sdk_one_per_s", "{:,.0f}"),
            ("bulk over HTTP, SDK Client", "sdk_bulk_per_s", "{:,.0f}"),
            ("bulk over HTTP, minimal answer", "sdk_bulk_minimal_per_s", "{:,.0f}"),
        ],
        enqueue_cols,
        width=36,
    )
    for slots in args.slots:
        cols = {column: cells.get(f"{column}@{slots}", {}) for _, column, _ in columns([s for s in run if not s.note])}
        print(f"\n{slots} worker slots (drain and CPU: median of {args.rounds} round(s))")
        print_table(
            [
                (f"drain {args.tasks:,} from worker start (tasks/s)", "drain_per_s", "{:,.0f}"),
                ("machine CPU per task (ms)", "machine_cpu_ms", "{:.2f}"),
                ("worker CPU per task (ms)", "worker_cpu_ms", "{:.2f}"),
                ("    PostgreSQL's CPU per task (ms)", "postgres_cpu_ms", "{:.2f}"),
                ("    Redis's CPU per task (ms)", "redis_cpu_ms", "{:.2f}"),
                ("    Conveyor node's CPU per task (ms)", "node_cpu_ms", "{:.2f}"),
                ("worker peak RSS, all processes (MB)", "worker_rss_mb", "{:.0f}"),
                ("worker PSS at the end, all processes (MB)", "worker_pss_mb", "{:.0f}"),
                *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s (ms)", "lat", "{:.2f}"),
                ("    samples", "lat_samples", "{:,.0f}"),
            ],
            cols,
            width=44,
        )
    print("\n- : no such API (Celery, Dramatiq and django-tasks-db have no bulk enqueue) or the run failed")
    for s in run:
        if s.note:
            print(f"{s.name}: not measured, {s.note}")


if __name__ == "__main__":
    main()
