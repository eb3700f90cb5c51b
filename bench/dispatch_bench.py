"""Drive a real node with real SDK workers; print throughput, latency and memory.

    .venv/bin/python bench/dispatch_bench.py [--backends dev,cluster] [--tasks 20000]

Per backend (dev = SQLite + in-memory layer; cluster = PostgreSQL + Redis):
  * enqueue tasks/s over HTTP: one by one from one producer (the SDK's
    Client.enqueue, and a bare http.client loop that builds nothing: the
    node's side alone) and from 8 concurrent producers (threads of the
    benchmark process sharing one SDK Client), and in batches of 1000
  * drain tasks/s: 20,000 no-op tasks already queued, workers with total concurrency 50
  * enqueue -> handler start latency (producer's clock to handler start): to an
    idle worker over 200 tasks sent one at a time, and p50/p95/p99 at a steady
    200 tasks/s from an open-loop producer over HTTP (after one unmeasured
    second of the same load, which opens the producer's connections); on the
    cluster also at 200 tasks/s from a producer enqueuing from Django code
    (bench/code_producer.py, the equivalent of Celery's delay())
  * peak RSS of the node and of a worker process
Every task is durably committed (enqueue, lease and ack are real transactions).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (
    REDIS_URL,
    ROOT,
    cpu_seconds,
    fresh_database,
    latency_percentiles,
    node_url,
    peak_rss_mb,
    percentile_rows,
    print_table,
    take_latency_log,
    vacuum,
)
from conveyor.sdk import Client


class Node:
    def __init__(
        self,
        backend: str,
        checkout: Path = ROOT,
        database: str = "conveyor_dispatch_bench",
        redis_url: str = REDIS_URL,
    ) -> None:
        """A node of *backend* on a fresh database (*database* on PostgreSQL),
        run from *checkout* (another build's working tree, for a side-by-side
        run; the database is migrated by this one's); the cluster's channel
        layer on *redis_url*."""
        url = fresh_database("sqlite" if backend == "dev" else "postgres", database)
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
            # A production node refuses the default key.
            "DJANGO_SECRET_KEY": "bench-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH",
            "PYTHONUNBUFFERED": "1",
        }
        argv = [sys.executable, "manage.py", "conveyord", "--port", "0"]
        if backend == "dev":
            argv.append("--dev")
            env.pop("REDIS_URL", None)
        else:
            env.update(
                REDIS_URL=redis_url,
                CONVEYOR_ALLOW_UNAUTHENTICATED="1",
                CONVEYOR_CHANNEL_PREFIX=f"bench{uuid.uuid4().hex[:6]}",
            )
        env["CONVEYOR_LOG_LEVEL"] = os.environ.get("BENCH_NODE_LOG_LEVEL", "WARNING")
        self.env = env  # a producer enqueuing from Django code needs the same database and layer
        self.shared_layer = backend != "dev"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="conveyor-bench-node-", suffix=".log", delete=False)  # noqa: SIM115 (lives as long as the node)
        self.proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        self.url = node_url(self.proc, self.log.name)
        self.http = httpx.Client(base_url=self.url, timeout=60)

    def vacuum(self) -> None:
        if self.shared_layer:  # PostgreSQL (see bench.common.vacuum)
            vacuum(self.env["DATABASE_URL"])

    def unfinished(self, queue: str) -> int:
        for q in self.http.get("/api/v1/queues").json()["queues"]:
            if q["name"] == queue:
                return sum(q["counts"][s] for s in ("pending", "active", "retry", "scheduled"))
        return 0

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self.proc.returncode == 0:  # a node that failed keeps its log for a look
            Path(self.log.name).unlink(missing_ok=True)


def start_workers(
    url: str, count: int, concurrency: int, queues: str, latency_log: str | None = None
) -> list[subprocess.Popen]:
    procs = []
    for _ in range(count):
        argv = [
            sys.executable,
            str(ROOT / "bench" / "worker_proc.py"),
            url,
            "--queues",
            queues,
            "--concurrency",
            str(concurrency),
        ]
        if latency_log:
            argv += ["--latency-log", latency_log]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}))
    return procs


def wait_sessions(node: Node, count: int) -> None:
    deadline = time.time() + 30
    while len(node.http.get("/api/v1/workers").json()["workers"]) < count:
        if time.time() > deadline:
            raise SystemExit("workers did not connect")
        time.sleep(0.1)


def stop_all(procs: list[subprocess.Popen]) -> list[float]:
    rss = [peak_rss_mb(p.pid) for p in procs]
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    return rss


IDLE_TASKS = 200


def stdlib_enqueue(url: str, count: int) -> float:
    """Tasks/s from one producer on the standard library's ``http.client``
    (keep-alive), one fixed body sent again and again: the node's side with
    a producer that does as little as it can."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    body = json.dumps({"type": "noop", "queue": "single", "json": {}}).encode()
    headers = {"Content-Type": "application/json"}

    def post() -> None:
        conn.request("POST", "/api/v1/tasks", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise SystemExit(f"enqueue answered {response.status}")

    try:
        start = time.perf_counter()
        for _ in range(count):
            post()
        return count / (time.perf_counter() - start)
    finally:
        conn.close()


def concurrent_enqueue(url: str, producers: int, count: int) -> float:
    """Tasks/s with *producers* threads sharing one SDK client, each enqueuing one task per request."""
    client = Client(url, timeout=60)

    def produce(n: int) -> None:
        for _ in range(n):
            client.enqueue("noop", {}, queue="single")

    with client, ThreadPoolExecutor(max_workers=producers) as pool:
        start = time.perf_counter()
        list(pool.map(produce, [count // producers] * producers))
        return count // producers * producers / (time.perf_counter() - start)


def steady_load(url: str, rate: float, count: int, warmup: int = 0) -> None:
    """Open-loop producer: one enqueue every 1/rate s, however long each takes.

    The POSTs go out from a small pool of connections so a slow response
    never delays the next send (a closed loop would hide queueing delay).
    The first *warmup* tasks are tagged "warmup" (not measured): they open
    the pool's connections, which costs the producer and the node a burst.
    """
    interval = 1.0 / rate
    client = Client(url, timeout=60)

    def send(tag: str) -> None:
        client.enqueue("noop", {"t": time.time(), "tag": tag}, queue="lat")

    with client, ThreadPoolExecutor(max_workers=16) as pool:
        next_at = time.perf_counter()
        for i in range(warmup + count):
            pause = next_at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            pool.submit(send, "warmup" if i < warmup else "steady")
            next_at += interval


def bench_backend(
    backend: str, tasks: int, workers: int, concurrency: int, rate: float, latency_tasks: int
) -> dict[str, float]:
    node = Node(backend)
    out: dict[str, float] = {}
    try:
        # Enqueue one by one from one producer (keep-alive connection).
        n = 2000
        with Client(node.url, timeout=60) as client:
            start = time.perf_counter()
            for _ in range(n):
                client.enqueue("noop", {}, queue="single")
            out["enqueue_one_sdk_per_s"] = n / (time.perf_counter() - start)
        used = cpu_seconds(node.proc.pid)
        out["enqueue_one_stdlib_per_s"] = stdlib_enqueue(node.url, n)
        out["node_cpu_per_enqueue_ms"] = (cpu_seconds(node.proc.pid) - used) / n * 1000
        out["enqueue_one_8_per_s"] = concurrent_enqueue(node.url, 8, 4000)

        # Enqueue in batches of 1000 (into the paused drain queue).
        node.http.post("/api/v1/queues/drain/pause")
        start = time.perf_counter()
        for _ in range(tasks // 1000):
            node.http.post(
                "/api/v1/tasks/batch",
                json={"tasks": [{"type": "noop", "queue": "drain", "json": {}} for _ in range(1000)]},
            )
        out["enqueue_batch_per_s"] = tasks // 1000 * 1000 / (time.perf_counter() - start)

        # Drain: workers connected, then resume and time until nothing is left.
        procs = start_workers(node.url, workers, concurrency // workers, "drain=1")
        wait_sessions(node, workers)
        start = time.perf_counter()
        node.http.post("/api/v1/queues/drain/resume")
        while node.unfinished("drain"):
            time.sleep(0.05)
        out["drain_per_s"] = (tasks // 1000 * 1000) / (time.perf_counter() - start)
        out["worker_rss_mb"] = max(stop_all(procs))
        node.vacuum()

        # Latency, measured from the producer's clock to the handler start:
        # first to an idle worker (one task at a time), then at a steady rate.
        latency_log = tempfile.mktemp(prefix="conveyor-latency-")
        procs = start_workers(node.url, 1, concurrency, "idle=1,lat=1,code=1", latency_log)
        wait_sessions(node, 1)
        for _ in range(IDLE_TASKS):
            node.http.post(
                "/api/v1/tasks", json={"type": "noop", "queue": "idle", "json": {"t": time.time(), "tag": "idle"}}
            )
            time.sleep(0.025)
        node.vacuum()
        steady_load(node.url, rate, latency_tasks, warmup=int(rate))  # one unmeasured second first
        if node.shared_layer:
            # Each run starts idle: a machine that fell behind over HTTP would
            # otherwise hand the next run its backlog.
            while node.unfinished("lat"):
                time.sleep(0.05)
            node.vacuum()
            # Another process reaches the node only through Redis (the
            # in-memory layer of a dev node has no way in but the self-check).
            producer = [sys.executable, str(ROOT / "bench" / "code_producer.py"), "code", str(rate)]
            producer += [str(latency_tasks), str(int(rate))]
            subprocess.run(producer, cwd=ROOT, env=node.env, check=True)
        while node.unfinished("lat") or node.unfinished("idle") or node.unfinished("code"):
            time.sleep(0.05)
        time.sleep(0.3)
        stop_all(procs)
        lines = take_latency_log(latency_log)
        idle = [float(parts[0]) for parts in lines if parts[1] == "idle"]
        steady = [float(parts[0]) for parts in lines if parts[1] == "steady"]
        code = [float(parts[0]) for parts in lines if parts[1] == "code"]
        out.update(latency_percentiles(idle, "idle") | latency_percentiles(steady))
        if code:
            out.update(latency_percentiles(code, "code"))
        out["latency_samples"] = len(steady)
        out["node_rss_mb"] = peak_rss_mb(node.proc.pid)
    finally:
        node.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="dev,cluster")
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes for the drain")
    parser.add_argument("--concurrency", type=int, default=50, help="total concurrency of the drain workers")
    parser.add_argument("--rate", type=float, default=200.0, help="tasks/s for the latency run")
    parser.add_argument("--latency-tasks", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {
        b: bench_backend(b, args.tasks, args.workers, args.concurrency, args.rate, args.latency_tasks)
        for b in args.backends.split(",")
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    rows = [
        ("enqueue one-by-one, SDK Client (tasks/s)", "enqueue_one_sdk_per_s", "{:,.0f}"),
        ("enqueue one-by-one, http.client (tasks/s)", "enqueue_one_stdlib_per_s", "{:,.0f}"),
        ("node CPU per one-by-one enqueue (ms)", "node_cpu_per_enqueue_ms", "{:.2f}"),
        ("enqueue one-by-one, 8 producers (tasks/s)", "enqueue_one_8_per_s", "{:,.0f}"),
        ("enqueue batch of 1000 (tasks/s)", "enqueue_batch_per_s", "{:,.0f}"),
        (f"drain {args.tasks:,} no-op, concurrency {args.concurrency} (tasks/s)", "drain_per_s", "{:,.0f}"),
        (f"idle worker: latency p50 over {IDLE_TASKS} (ms)", "idle_p50_ms", "{:.1f}"),
        (f"idle worker: latency p99 over {IDLE_TASKS} (ms)", "idle_p99_ms", "{:.1f}"),
        *percentile_rows(f"latency {{p}} at {args.rate:.0f}/s (ms)", "latency"),
        *percentile_rows(f"from Django code: latency {{p}} at {args.rate:.0f}/s (ms)", "code"),
        ("node peak RSS (MB)", "node_rss_mb", "{:.0f}"),
        ("worker peak RSS (MB)", "worker_rss_mb", "{:.0f}"),
    ]
    print_table(rows, results)


if __name__ == "__main__":
    main()
