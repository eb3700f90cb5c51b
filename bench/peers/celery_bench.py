"""Celery 5 with Redis: drain and latency, the same workload as bench/dispatch_bench.py.

Run by bench/compare.py inside bench/.peers (see `make bench-peers`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.common import at_rate, latency_percentiles, one_by_one_round, peak_rss_mb, serve
from bench.peers.celery_app import PREFIX, REDIS_URL, counter, noop


def worker(concurrency: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "bench.peers.celery_app",
            "worker",
            "-P",
            "threads",
            "-c",
            str(concurrency),
            "-Q",
            PREFIX,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
        ],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_done(n: int, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while int(counter.get(f"{PREFIX}:done") or 0) < n:
        if time.time() > deadline:
            raise SystemExit("celery did not finish")
        time.sleep(0.05)


def round_only(count: int) -> None:
    """One of bench/compare.py's interleaved rounds: *count* delay() calls, from an empty queue and back to one."""
    queue = redis.Redis.from_url(REDIS_URL)
    queue.delete(PREFIX)  # a round starts on an empty queue
    per_s = one_by_one_round(noop.delay, count)
    queue.delete(PREFIX)
    print(json.dumps({"per_s": per_s}))


def latency_round(count: int, rate: float, warmup: int) -> None:
    """One of bench/compare.py's interleaved latency rounds, on a worker it
    started (``serve``): *warmup* unmeasured then *count* measured delay()
    calls at *rate* per second; returns when all have run. The samples
    gather in the list ``PREFIX:latency``."""
    counter.delete(f"{PREFIX}:done")
    at_rate(warmup + count, rate, lambda i: noop.delay(time.time()) if i >= warmup else noop.delay())
    wait_done(warmup + count)


def main() -> None:
    if sys.argv[1] == "round":
        round_only(int(sys.argv[2]))
        return
    if sys.argv[1] == "latency-round":
        latency_round(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
        return
    if sys.argv[1] == "serve":  # a worker for the latency rounds, until SIGTERM
        serve(worker(int(sys.argv[2])))
    tasks, concurrency, rate, latency_tasks = (int(a) for a in sys.argv[1:5])
    counter.delete(f"{PREFIX}:done", f"{PREFIX}:latency", f"{PREFIX}:first", f"{PREFIX}:last")
    redis.Redis.from_url(REDIS_URL).delete(PREFIX)  # the broker's queue: start empty
    out: dict[str, float] = {}
    start = time.perf_counter()
    for _ in range(2000):
        noop.delay()
    out["enqueue_code_one_run_per_s"] = 2000 / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(tasks - 2000):
        noop.delay()
    out["enqueue_code_batch_per_s"] = (tasks - 2000) / (time.perf_counter() - start)  # Celery has no batch enqueue
    proc = worker(concurrency)
    wait_done(tasks)
    first, last = (float(counter.get(f"{PREFIX}:{k}")) for k in ("first", "last"))
    out["drain_per_s"] = (tasks - 1) / (last - first)  # first to last completion
    counter.delete(f"{PREFIX}:done")
    at_rate(latency_tasks, rate, lambda _: noop.delay(time.time()))
    wait_done(latency_tasks)
    samples = [float(x) for x in counter.lrange(f"{PREFIX}:latency", 0, -1)]
    out.update(latency_percentiles(samples, "code"))  # their client library, like Conveyor's code_producer
    out["worker_rss_mb"] = peak_rss_mb(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
