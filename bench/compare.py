"""Conveyor side by side with Celery (Redis) and procrastinate (PostgreSQL), in one run.

    make bench-peers        # creates bench/.peers with the peers, then runs this

Same workload for each: enqueue one by one, enqueue in bulk, drain N no-op
tasks with concurrency 50, enqueue->start latency at a steady rate. Then
the one-by-one enqueue again, in rounds that alternate between the systems
(``--rounds``, ``--round-tasks``): the machine's speed drifts between the
full runs, and the rounds give every system the same moments. The latency
at the steady rate too (``--latency-rounds``, ``--latency-round-tasks``).
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
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (
    REDIS_URL,
    ROOT,
    durable_redis,
    fresh_database,
    latency_percentiles,
    percentile_rows,
    print_table,
    take_latency_log,
)
from bench.dispatch_bench import Node, bench_backend, start_workers, stop_all, wait_sessions

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


def in_process_env() -> dict[str, str]:
    """The environment of a Django producer of a cluster (PostgreSQL and the Redis
    channel layer) on a fresh database, for bench/broker_bench.py."""
    url = fresh_database("postgres", "conveyor_compare_inproc")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
    }
    env["CONVEYOR_CHANNEL_PREFIX"] = "bench_compare"  # wakes no node of another run
    return env


def in_process(env: dict[str, str]) -> dict[str, float]:
    """Conveyor's enqueue from Django code (no HTTP), as the peers' clients enqueue:
    through the process's broker (``get_broker()``), wakes and events included."""
    argv = [sys.executable, str(ROOT / "bench" / "broker_bench.py"), "--inner", "--process-broker", "--tasks", "10000"]
    out = subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"enqueue_code_one_run_per_s": result["enqueue_one"], "enqueue_code_batch_per_s": result["enqueue_batch"]}


def rotated(names: list[str], r: int) -> list[str]:
    """The systems in round *r*'s order: each round starts with the next one."""
    k = r % len(names)
    return names[k:] + names[:k]


def interleaved_rounds(
    rounds: int, count: int, conveyor_env: dict[str, str], fsync_url: str | None
) -> dict[str, dict[str, float]]:
    """Enqueue one by one from each system's client library in alternating rounds.

    The full runs measure each system minutes apart, and this machine's speed
    drifts by up to 2x within minutes (other tenants); a difference of 10-40%
    between two systems is then the clock's as much as theirs. Here each
    round runs every system once, back to back, starting with a different one
    each time, so drift falls on all alike; the median round is reported.
    Each round is a fresh process: ``ROUND_WARMUP`` untimed enqueues, then
    *count* timed ones, from an empty queue.
    """
    peers = PEERS_PYTHON.exists()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "conveyor": ([sys.executable, str(ROOT / "bench" / "broker_bench.py"), "--round", str(count)], conveyor_env)
    }
    if peers:
        celery = [str(PEERS_PYTHON), str(ROOT / "bench" / "peers" / "celery_bench.py"), "round", str(count)]
        commands["celery"] = (celery, env)
        if fsync_url is not None:
            commands["celery+fsync"] = (celery, {**env, "BENCH_REDIS_URL": fsync_url, "BENCH_COUNTER_URL": REDIS_URL})
        procrastinate = [str(PEERS_PYTHON), str(ROOT / "bench" / "peers" / "procrastinate_bench.py"), "round"]
        commands["procrastinate"] = ([*procrastinate, str(count)], env)
    names = list(commands)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in rotated(names, r):
            argv, run_env = commands[name]
            out = subprocess.run(argv, cwd=ROOT, env=run_env, check=True, capture_output=True, text=True)
            samples[name].append(json.loads(out.stdout.strip().splitlines()[-1])["per_s"])
    return {
        name: {
            "enqueue_code_one_per_s": statistics.median(values),
            "enqueue_code_one_min_per_s": min(values),
            "enqueue_code_one_max_per_s": max(values),
        }
        for name, values in samples.items()
    }


LATENCY_WARMUP = 20  # unmeasured tasks at the start of each latency round


def latency_rounds(rounds: int, count: int, rate: float, fsync_url: str | None) -> dict[str, dict[str, float]]:
    """Enqueue -> start latency from each system's client library, in rounds
    that alternate between the systems, as ``interleaved_rounds`` does for
    the enqueue (a p99 is the slowest 1% of the samples: the moments the
    machine stalls, which should fall on every system alike).

    Every system's worker (concurrency 50) runs through all rounds; a round
    is a fresh producer process sending ``LATENCY_WARMUP`` unmeasured then
    *count* measured tasks at *rate* per second, and waiting until they all
    ran. A first unrecorded round each lets every worker come up.
    """
    import redis

    counter = redis.Redis.from_url(REDIS_URL)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    handle, latency_log = tempfile.mkstemp(prefix="conveyor-latency-")
    os.close(handle)
    node = Node("cluster")
    workers: list[subprocess.Popen] = []
    servers: list[subprocess.Popen] = []
    lists: dict[str, str] = {}  # system -> its samples' list in the machine's Redis (seconds)

    def conveyor_round(n: int) -> None:
        producer = [sys.executable, str(ROOT / "bench" / "code_producer.py"), "code", str(rate), str(n)]
        subprocess.run([*producer, str(LATENCY_WARMUP)], cwd=ROOT, env=node.env, check=True, timeout=900)
        deadline = time.time() + 600
        while node.unfinished("code"):
            if time.time() > deadline:
                raise SystemExit("conveyor's latency round did not finish")
            time.sleep(0.05)

    producers = {"conveyor": conveyor_round}
    try:
        workers = start_workers(node.url, 1, 50, "code=1", latency_log)
        wait_sessions(node, 1)
        if PEERS_PYTHON.exists():
            peers = {
                "celery": ("celery_bench.py", {}, "celerybench"),
                "procrastinate": ("procrastinate_bench.py", {}, "procbench"),
            }
            if fsync_url is not None:
                fsync_env = {
                    "BENCH_REDIS_URL": fsync_url,
                    "BENCH_COUNTER_URL": REDIS_URL,
                    "BENCH_PREFIX": "celeryfsync",
                }
                peers["celery+fsync"] = ("celery_bench.py", fsync_env, "celeryfsync")
            for name, (script, extra, prefix) in peers.items():
                argv = [str(PEERS_PYTHON), str(ROOT / "bench" / "peers" / script)]
                server = subprocess.Popen(
                    [*argv, "serve", "50"], cwd=ROOT, env={**env, **extra}, stdout=subprocess.PIPE, text=True
                )
                servers.append(server)
                assert server.stdout is not None
                if server.stdout.readline().strip() != "ready":  # its database and worker are set up
                    raise SystemExit(f"{name}'s worker did not start")
                lists[name] = f"{prefix}:latency"

                def peer_round(n: int, argv: list[str] = argv, extra: dict[str, str] = extra) -> None:
                    round_argv = [*argv, "latency-round", str(n), str(rate), str(LATENCY_WARMUP)]
                    subprocess.run(round_argv, cwd=ROOT, env={**env, **extra}, check=True, timeout=900)

                producers[name] = peer_round
        names = list(producers)
        for name in names:
            producers[name](0)  # its worker is up and has run a task
        if lists:
            counter.delete(*lists.values())
        for r in range(rounds):
            for name in rotated(names, r):
                producers[name](count)
        samples = {name: [float(x) for x in counter.lrange(key, 0, -1)] for name, key in lists.items()}
        stop_all(workers)
        workers = []
        samples["conveyor"] = [float(parts[0]) for parts in take_latency_log(latency_log) if parts[1] == "code"]
    finally:
        stop_all(workers)
        for proc in servers:
            proc.terminate()
        for proc in servers:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        node.stop()
        if os.path.exists(latency_log):
            os.unlink(latency_log)
    return {
        name: latency_percentiles(values, "rounds") | {"rounds_samples": len(values)}
        for name, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--latency-tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved one-by-one enqueue rounds (default 5)")
    parser.add_argument("--round-tasks", type=int, default=2000, help="enqueues per round (default 2000)")
    parser.add_argument("--latency-rounds", type=int, default=8, help="interleaved latency rounds (default 8)")
    parser.add_argument(
        "--latency-round-tasks", type=int, default=500, help="measured tasks per latency round (default 500)"
    )
    args = parser.parse_args()
    results = {"conveyor": bench_backend("cluster", args.tasks, 2, 50, args.rate, args.latency_tasks)}
    conveyor_env = in_process_env()
    results["conveyor"].update(in_process(conveyor_env))
    # Celery also on a Redis that keeps what it accepted.
    with durable_redis() as fsync_url:
        if PEERS_PYTHON.exists():
            results["celery"] = peer("celery_bench.py", args)
            if fsync_url is not None:
                results["celery+fsync"] = peer(
                    "celery_bench.py", args, BENCH_REDIS_URL=fsync_url, BENCH_COUNTER_URL=REDIS_URL
                )
            results["procrastinate"] = peer("procrastinate_bench.py", args)
        else:
            print(
                "bench/.peers is missing: run `make bench-peers` to compare with Celery and procrastinate",
                file=sys.stderr,
            )
        if args.rounds > 0:
            for name, row in interleaved_rounds(args.rounds, args.round_tasks, conveyor_env, fsync_url).items():
                results[name].update(row)
        if args.latency_rounds > 0:
            measured = latency_rounds(args.latency_rounds, args.latency_round_tasks, args.rate, fsync_url)
            for name, row in measured.items():
                results[name].update(row)
    rows = [
        (f"enqueue one-by-one, client library, median of {args.rounds} rounds", "enqueue_code_one_per_s", "{:,.0f}"),
        ("    slowest round", "enqueue_code_one_min_per_s", "{:,.0f}"),
        ("    fastest round", "enqueue_code_one_max_per_s", "{:,.0f}"),
        ("enqueue one-by-one, client library, in the full run", "enqueue_code_one_run_per_s", "{:,.0f}"),
        ("enqueue in bulk, client library (tasks/s)", "enqueue_code_batch_per_s", "{:,.0f}"),
        ("enqueue one-by-one over HTTP, SDK Client (tasks/s)", "enqueue_one_sdk_per_s", "{:,.0f}"),
        ("enqueue one-by-one over HTTP, http.client (tasks/s)", "enqueue_one_stdlib_per_s", "{:,.0f}"),
        ("node CPU per one-by-one HTTP enqueue (ms)", "node_cpu_per_enqueue_ms", "{:.2f}"),
        ("enqueue one-by-one over HTTP, 8 producers", "enqueue_one_8_per_s", "{:,.0f}"),
        ("enqueue in bulk over HTTP (tasks/s)", "enqueue_batch_per_s", "{:,.0f}"),
        (f"drain {args.tasks:,} no-op, concurrency 50 (tasks/s)", "drain_per_s", "{:,.0f}"),
        *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s, client library (ms)", "code"),
        *percentile_rows(f"same, {args.latency_rounds} interleaved rounds, {{p}} (ms)", "rounds", "{:.2f}"),
        ("    samples", "rounds_samples", "{:,.0f}"),
        *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s over HTTP (ms)", "latency"),
        ("worker peak RSS (MB)", "worker_rss_mb", "{:.0f}"),
    ]
    print_table(rows, results, width=60)


if __name__ == "__main__":
    main()
