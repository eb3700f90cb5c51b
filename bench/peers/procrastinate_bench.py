"""procrastinate on PostgreSQL: drain and latency, the same workload as bench/dispatch_bench.py.

Run by bench/compare.py inside bench/.peers (see `make bench-peers`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import psycopg
import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.common import (
    PG_ADMIN,
    REDIS_URL,
    at_rate,
    latency_percentiles,
    one_by_one_round,
    peak_rss_mb,
    serve,
    vacuum,
)

DB = PG_ADMIN.rsplit("/", 1)[0] + "/procrastinate_bench"
WORKDIR = os.path.join("/tmp", "procbench")
counter = redis.Redis.from_url(REDIS_URL)

APP = """
import time, redis, procrastinate
counter = redis.Redis.from_url({redis!r})
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo={db!r}))

@app.task(name="noop", queue="bench")
def noop(sent=None):
    if sent is not None:
        counter.rpush("procbench:latency", time.time() - sent)
    now = time.time()
    pipe = counter.pipeline(transaction=False)
    pipe.setnx("procbench:first", now)
    pipe.set("procbench:last", now)
    pipe.incr("procbench:done")
    pipe.execute()
"""


def fresh_app() -> Any:
    """A new procrastinate_bench database with procrastinate's schema, and the app on it."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS procrastinate_bench WITH (FORCE)")
        conn.execute("CREATE DATABASE procrastinate_bench")
    os.makedirs(WORKDIR, exist_ok=True)
    with open(os.path.join(WORKDIR, "procapp.py"), "w") as f:
        f.write(APP.format(redis=REDIS_URL, db=DB))
    subprocess.run(
        [sys.executable, "-m", "procrastinate", "--app=procapp.app", "schema", "--apply"],
        env={**os.environ, "PYTHONPATH": WORKDIR},
        check=True,
        capture_output=True,
    )
    sys.path.insert(0, WORKDIR)
    import procapp

    return procapp


def round_only(count: int) -> None:
    """One of bench/compare.py's interleaved rounds: *count* defer() calls, from
    an empty jobs table and back to one (on the database a full run left, or
    on a new one)."""
    try:
        psycopg.connect(DB).close()
        sys.path.insert(0, WORKDIR)
        import procapp
    except (psycopg.OperationalError, ImportError):
        procapp = fresh_app()
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("TRUNCATE procrastinate_jobs CASCADE")  # a round starts on an empty queue
        with procapp.app.open():
            per_s = one_by_one_round(procapp.noop.defer, count)
        conn.execute("TRUNCATE procrastinate_jobs CASCADE")
    print(json.dumps({"per_s": per_s}))


def latency_round(count: int, rate: float, warmup: int) -> None:
    """One of bench/compare.py's interleaved latency rounds, on a worker it
    started (``serve``): *warmup* unmeasured then *count* measured defer()
    calls at *rate* per second; returns when all have run. The samples
    gather in the list ``procbench:latency``."""
    sys.path.insert(0, WORKDIR)
    import procapp

    counter.delete("procbench:done")
    with procapp.app.open():
        at_rate(
            warmup + count,
            rate,
            lambda i: procapp.noop.defer(sent=time.time()) if i >= warmup else procapp.noop.defer(),
        )
    wait_done(warmup + count)


def wait_done(n: int, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while int(counter.get("procbench:done") or 0) < n:
        if time.time() > deadline:
            raise SystemExit("procrastinate did not finish")
        time.sleep(0.05)


def worker(concurrency: int) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "procrastinate",
            "--app=procapp.app",
            "worker",
            "--concurrency",
            str(concurrency),
            "--queues",
            "bench",
        ],
        env={**os.environ, "PYTHONPATH": WORKDIR},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    if sys.argv[1] == "round":
        round_only(int(sys.argv[2]))
        return
    if sys.argv[1] == "latency-round":
        latency_round(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
        return
    if sys.argv[1] == "serve":  # a worker for the latency rounds (on a new database), until SIGTERM
        fresh_app()
        serve(worker(int(sys.argv[2])))
    tasks, concurrency, rate, latency_tasks = (int(a) for a in sys.argv[1:5])
    procapp = fresh_app()
    counter.delete("procbench:done", "procbench:latency", "procbench:first", "procbench:last")
    out: dict[str, float] = {}
    with procapp.app.open():
        start = time.perf_counter()
        for _ in range(2000):
            procapp.noop.defer()
        out["enqueue_code_one_run_per_s"] = 2000 / (time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range((tasks - 2000) // 1000):
            procapp.noop.batch_defer(*[{} for _ in range(1000)])
        out["enqueue_code_batch_per_s"] = (tasks - 2000) // 1000 * 1000 / (time.perf_counter() - start)
        proc = worker(concurrency)
        try:
            measure(procapp, proc, out, tasks, rate, latency_tasks)
        finally:  # the worker is not left running when the run fails
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(json.dumps(out))


def measure(
    procapp: Any, proc: subprocess.Popen, out: dict[str, float], tasks: int, rate: int, latency_tasks: int
) -> None:
    """The drain (already started by the worker *proc*) and the latency run."""
    done = (tasks - 2000) // 1000 * 1000 + 2000
    wait_done(done, timeout=3600)  # (it drains at 50-100 tasks/s here)
    # Timed from the first completion to the last: start-up not counted.
    first, last = (float(counter.get(f"procbench:{k}")) for k in ("first", "last"))
    out["drain_per_s"] = (done - 1) / (last - first)
    counter.delete("procbench:done")
    vacuum(DB)  # as bench/dispatch_bench.py does for Conveyor
    at_rate(latency_tasks, rate, lambda _: procapp.noop.defer(sent=time.time()))
    wait_done(latency_tasks, timeout=3600)  # (it may fall behind the rate)
    samples = [float(x) for x in counter.lrange("procbench:latency", 0, -1)]
    out.update(latency_percentiles(samples, "code"))  # their client library, like Conveyor's code_producer
    out["worker_rss_mb"] = peak_rss_mb(proc.pid)


if __name__ == "__main__":
    main()
