"""Conveyor side by side with Celery (Redis) and procrastinate (PostgreSQL), in one run.

    make bench-peers        # creates bench/.peers with the peers, then runs this

Same workload for each: enqueue one by one, enqueue in bulk, drain N no-op
tasks with concurrency 50, enqueue->start latency at a steady rate.
Conveyor runs in its production shape (PostgreSQL + Redis, one node). The
peers enqueue through their client library from the producer's process;
Conveyor's equivalent is enqueuing from Django code (the broker, straight to
PostgreSQL), shown next to its REST API numbers. Celery runs twice: on the
machine's Redis (no persistence: what it accepted is lost if Redis dies) and
on a private Redis that fsyncs every write ("celery+fsync"), the promise
Conveyor makes with PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REDIS_URL, ROOT, durable_redis, fresh_database, percentile_rows, print_table
from bench.dispatch_bench import bench_backend

PEERS_PYTHON = ROOT / "bench" / ".peers" / "bin" / "python"


def peer(script: str, args: argparse.Namespace, **env: str) -> dict[str, float]:
    argv = [
        str(PEERS_PYTHON),
        str(ROOT / "bench" / "peers" / script),
        str(args.tasks),
        "50",
        str(int(args.rate)),
        str(args.latency_tasks),
    ]
    out = subprocess.run(
        argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=1800
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def in_process() -> dict[str, float]:
    """Conveyor's enqueue from Django code (no HTTP), as the peers' clients enqueue:
    through the process's broker of a cluster's Django producer (``get_broker()``,
    PostgreSQL and the Redis channel layer), wakes and events included."""
    url = fresh_database("postgres", "conveyor_compare_inproc")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
    }
    env["CONVEYOR_CHANNEL_PREFIX"] = "bench_compare"  # wakes no node of another run
    argv = [sys.executable, str(ROOT / "bench" / "broker_bench.py"), "--inner", "--process-broker", "--tasks", "10000"]
    out = subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"enqueue_code_one_per_s": result["enqueue_one"], "enqueue_code_batch_per_s": result["enqueue_batch"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--latency-tasks", type=int, default=2000)
    args = parser.parse_args()
    results = {"conveyor": bench_backend("cluster", args.tasks, 2, 50, args.rate, args.latency_tasks)}
    results["conveyor"].update(in_process())
    if PEERS_PYTHON.exists():
        results["celery"] = peer("celery_bench.py", args)
        with durable_redis() as url:  # Celery on a Redis that keeps what it accepted
            if url is not None:
                results["celery+fsync"] = peer(
                    "celery_bench.py", args, BENCH_REDIS_URL=url, BENCH_COUNTER_URL=REDIS_URL
                )
        results["procrastinate"] = peer("procrastinate_bench.py", args)
    else:
        print(
            "bench/.peers is missing: run `make bench-peers` to compare with Celery and procrastinate", file=sys.stderr
        )
    rows = [
        ("enqueue one-by-one, client library (tasks/s)", "enqueue_code_one_per_s", "{:,.0f}"),
        ("enqueue in bulk, client library (tasks/s)", "enqueue_code_batch_per_s", "{:,.0f}"),
        ("enqueue one-by-one over HTTP, SDK Client (tasks/s)", "enqueue_one_sdk_per_s", "{:,.0f}"),
        ("enqueue one-by-one over HTTP, http.client (tasks/s)", "enqueue_one_stdlib_per_s", "{:,.0f}"),
        ("node CPU per one-by-one HTTP enqueue (ms)", "node_cpu_per_enqueue_ms", "{:.2f}"),
        ("enqueue one-by-one over HTTP, 8 producers", "enqueue_one_8_per_s", "{:,.0f}"),
        ("enqueue in bulk over HTTP (tasks/s)", "enqueue_batch_per_s", "{:,.0f}"),
        (f"drain {args.tasks:,} no-op, concurrency 50 (tasks/s)", "drain_per_s", "{:,.0f}"),
        *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s, client library (ms)", "code"),
        *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s over HTTP (ms)", "latency"),
        ("worker peak RSS (MB)", "worker_rss_mb", "{:.0f}"),
    ]
    print_table(rows, results)


if __name__ == "__main__":
    main()
