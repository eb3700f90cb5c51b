"""CPU per task of every process at a steady rate, and rows PostgreSQL read per task.

    .venv/bin/python bench/steady_cpu.py [--rate 200] [--tasks 2000] [--drain]

Starts a cluster node (PostgreSQL + Redis) and one SDK worker, enqueues from
Django code at a fixed rate (bench/code_producer.py) and prints
enqueue -> start latency, the CPU seconds per task of the node, the worker,
PostgreSQL's backends, Redis and the producer, and what pg_stat_* counted per task
(commits, rows read, sequential scans of conveyor_task). ``--drain`` first
runs 20,000 tasks through the queue, as dispatch_bench.py's drain does
before its latency runs. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, latency_percentiles, take_latency_log
from bench.dispatch_bench import Node, start_workers, stop_all, wait_sessions

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def pids_of(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def database_counters(url: str) -> list[float]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        commits, read = conn.execute(
            "SELECT xact_commit, tup_returned + tup_fetched FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        seq = conn.execute("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'conveyor_task'").fetchone()[0]
    return [commits, read, seq]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--drain", action="store_true")
    args = parser.parse_args()
    node = Node("cluster")
    try:
        log = tempfile.mktemp(prefix="conveyor-steady-")
        procs = start_workers(node.url, 1, 50, "code=1", log)
        wait_sessions(node, 1)
        if args.drain:
            for _ in range(20):
                tasks = [{"type": "noop", "queue": "code", "json": {}} for _ in range(1000)]
                node.http.post("/api/v1/tasks/batch", json={"tasks": tasks})
            while node.unfinished("code"):
                time.sleep(0.1)
        node.vacuum()
        url = node.env["DATABASE_URL"]
        postgres, redis = pids_of("postgres: "), pids_of("redis-server")
        before = [cpu_seconds([node.proc.pid]), cpu_seconds([procs[0].pid]), cpu_seconds(postgres), cpu_seconds(redis)]
        counters = database_counters(url)
        producer = [sys.executable, str(ROOT / "bench" / "code_producer.py"), "code", str(args.rate), str(args.tasks)]
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(producer, cwd=ROOT, env=node.env, check=True)
        produced = resource.getrusage(resource.RUSAGE_CHILDREN)
        producer_cpu = produced.ru_utime + produced.ru_stime - children.ru_utime - children.ru_stime
        while node.unfinished("code"):
            time.sleep(0.05)
        time.sleep(1.5)  # PostgreSQL publishes a backend's counters within a second
        postgres = sorted(set(postgres) | set(pids_of("postgres: ")))
        after = [cpu_seconds([node.proc.pid]), cpu_seconds([procs[0].pid]), cpu_seconds(postgres), cpu_seconds(redis)]
        counted = [b - a for a, b in zip(counters, database_counters(url), strict=True)]
        stop_all(procs)
        lines = take_latency_log(log)
        latency = latency_percentiles([float(p[0]) for p in lines if p[1] == "code"])
        n = args.tasks
        print(
            f"enqueue -> start at {args.rate:.0f}/s from Django code (ms): "
            + ", ".join(f"{k.split('_')[1]} {v:.1f}" for k, v in latency.items())
        )
        for name, a, b in zip(("node", "worker", "postgres", "redis"), before, after, strict=True):
            print(f"{name:<9} CPU per task {1000 * (b - a) / n:6.2f} ms")
        print(f"{'producer':<9} CPU per task {1000 * producer_cpu / n:6.2f} ms (start-up included)")
        print(
            f"postgres  per task: {counted[0] / n:.1f} commits, {counted[1] / n:,.0f} rows read, "
            f"{counted[2] / n:.2f} sequential scans of conveyor_task"
        )
    finally:
        node.stop()


if __name__ == "__main__":
    main()
