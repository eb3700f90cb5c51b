"""The part of bench/compare.py every system's driver shares.

A driver (``bench/peers/<system>_bench.py``, and ``bench/compare_conveyor.py``)
describes its system as a ``System``; ``main`` runs one phase of the
comparison on it, chosen by the command line, and prints one JSON line:

    setup                                     fresh database / queue
    enqueue COUNT                             one_per_s, bulk_per_s (and the system's extras)
    drain TASKS SLOTS VARIANT                 drain_per_s, machine_cpu_ms, worker_cpu_ms, worker_rss_mb
    latency COUNT RATE SLOTS VARIANT WARMUP   samples (seconds, enqueue -> handler start)

Every system's no-op task does the same: with a send time, it appends
``now - sent`` to the list ``PREFIX:latency``; then it adds one to
``PREFIX:done`` (one pipelined round trip to the counter Redis,
``BENCH_COUNTER_URL``). That counter is how a phase sees its tasks done.
Runs in both virtual environments (bench/.peers and the project's).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.common import ROOT, ROUND_WARMUP, at_rate, measure_drain, stop_tree, tree_cpu_seconds

COUNTER_URL = os.environ.get("BENCH_COUNTER_URL", "redis://127.0.0.1:6379/0")


def counter_client() -> redis.Redis:
    return redis.Redis.from_url(COUNTER_URL)


def count_done(counter: redis.Redis, prefix: str, sent: float | None) -> None:
    """The no-op task's one piece of work (every system's alike)."""
    pipe = counter.pipeline(transaction=False)
    if sent is not None:
        pipe.rpush(f"{prefix}:latency", time.time() - sent)
    pipe.incr(f"{prefix}:done")
    pipe.execute()


def popen(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """A worker process in a session of its own (so that its whole tree can be stopped)."""
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class System:
    """One system under comparison; a driver subclasses it."""

    prefix = "bench"  # its keys in the counter Redis
    bulk_size = 1000  # tasks per bulk call

    def setup(self) -> None:
        """A fresh database (or broker state) for the run."""

    def reset(self) -> None:
        """Empty its queue (before and after each phase)."""

    @contextlib.contextmanager
    def opened(self) -> Iterator[None]:
        """Around a phase's enqueues (a client connection the system wants open)."""
        yield

    def enqueue(self, sent: float | None = None) -> None:
        """Enqueue one no-op task through the system's client library."""
        raise NotImplementedError

    def enqueue_bulk(self, count: int) -> None:
        """Enqueue *count* no-op tasks in one call of the client library."""
        raise NotImplementedError

    has_bulk = True

    def extra_enqueue(self, count: int) -> dict[str, float]:
        """Further enqueue measurements of the system's own (Conveyor's over HTTP)."""
        return {}

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        """Start the system's worker with *slots* task slots, in configuration *variant*."""
        raise NotImplementedError

    def drained(self) -> None:
        """After the counter saw every task: wait for the system's own
        bookkeeping where the driver can see it (Conveyor: the acks)."""


def wait_done(counter: redis.Redis, prefix: str, n: int, timeout: float = 1800) -> None:
    deadline = time.time() + timeout
    while int(counter.get(f"{prefix}:done") or 0) < n:
        if time.time() > deadline:
            raise SystemExit(f"{prefix}: {int(counter.get(f'{prefix}:done') or 0)} of {n} tasks ran")
        time.sleep(0.01)


def enqueue_phase(system: System, count: int) -> dict[str, float]:
    system.reset()
    out: dict[str, float] = {}
    with system.opened():
        for _ in range(ROUND_WARMUP):
            system.enqueue()
        start = time.perf_counter()
        for _ in range(count):
            system.enqueue()
        out["one_per_s"] = count / (time.perf_counter() - start)
        if system.has_bulk:
            size = min(system.bulk_size, count)
            system.enqueue_bulk(size)  # unmeasured, as the warm-up above
            batches = max(1, count // size)
            start = time.perf_counter()
            for _ in range(batches):
                system.enqueue_bulk(size)
            out["bulk_per_s"] = batches * size / (time.perf_counter() - start)
    system.reset()
    out.update(system.extra_enqueue(count))
    system.reset()
    return out


def fill(system: System, tasks: int) -> None:
    """Queue *tasks* no-op tasks, in bulk where the system has it."""
    with system.opened():
        if system.has_bulk:
            left = tasks
            while left:
                size = min(system.bulk_size, left)
                system.enqueue_bulk(size)
                left -= size
        else:
            for _ in range(tasks):
                system.enqueue()


def drain_phase(system: System, tasks: int, slots: int, variant: str) -> dict[str, float]:
    counter = counter_client()
    system.reset()
    counter.delete(f"{system.prefix}:done")
    fill(system, tasks)

    def done() -> int:
        n = int(counter.get(f"{system.prefix}:done") or 0)
        if n >= tasks:
            system.drained()
        return n

    out = measure_drain(lambda: system.worker(slots, variant), done, tasks)
    system.reset()
    return out


def settle(proc: subprocess.Popen, timeout: float = 600) -> None:
    """Wait until the worker's process tree is idle (under a fifth of a core
    over half a second): all of a pool's processes have started."""
    deadline = time.time() + timeout
    used = tree_cpu_seconds(proc.pid)
    while time.time() < deadline:
        time.sleep(0.5)
        now = tree_cpu_seconds(proc.pid)
        if now - used < 0.1:
            return
        used = now


def latency_phase(system: System, count: int, rate: float, slots: int, variant: str, warmup: int) -> dict[str, Any]:
    """Start the worker, wait for it to run one task and to be idle, then send *warmup*
    unmeasured and *count* measured tasks at *rate* per second from one
    producer on a fixed schedule (a slow enqueue delays the next)."""
    counter = counter_client()
    system.reset()
    keys = (f"{system.prefix}:done", f"{system.prefix}:latency")
    counter.delete(*keys)
    proc = system.worker(slots, variant)
    try:
        with system.opened():
            system.enqueue()
            wait_done(counter, system.prefix, 1, timeout=300)  # the worker is up
            settle(proc)  # and all its processes are
            counter.delete(*keys)
            at_rate(warmup + count, rate, lambda i: system.enqueue(time.time() if i >= warmup else None))
        wait_done(counter, system.prefix, warmup + count)
        samples = [float(x) for x in counter.lrange(keys[1], 0, -1)]
    finally:
        stop_tree(proc)
    system.reset()
    return {"samples": samples}


def main(system: System, argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    phase = args[0]
    out: dict[str, Any]
    if phase == "setup":
        system.setup()
        out = {}
    elif phase == "enqueue":
        out = enqueue_phase(system, int(args[1]))
    elif phase == "drain":
        out = drain_phase(system, int(args[1]), int(args[2]), args[3])
    elif phase == "latency":
        out = latency_phase(system, int(args[1]), float(args[2]), int(args[3]), args[4], int(args[5]))
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    print(json.dumps(out))


def noop_counter() -> Callable[[float | None], None]:
    """The no-op task's body for a driver's task module (prefix from ``BENCH_PREFIX``)."""
    counter = counter_client()
    prefix = os.environ.get("BENCH_PREFIX", "bench")
    return lambda sent: count_done(counter, prefix, sent)
