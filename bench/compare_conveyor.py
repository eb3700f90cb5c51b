"""Conveyor's driver for bench/compare.py (see bench/peers/driver.py).

Runs in the project's virtual environment, next to a node bench/compare.py
started: ``CONVEYOR_URL`` is the node, the rest of the environment (the
database, the Redis channel layer) is the node's, so an enqueue from Django
code here is a producer of that cluster. Its client library is the broker
called from Django code (``get_broker()``: the INSERT committed, then a wake
over the channel layer); the extra enqueue rows are the SDK ``Client`` over
HTTP. Variant ``pN``: one SDK worker process (bench/worker_proc.py,
``AsyncWorker``) of concurrency SLOTS and ``prefetch=N``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, ROUND_WARMUP, vacuum
from bench.peers.driver import System, main, popen

QUEUE = "bench"
PREFIX = "conveyorbench"


class Conveyor(System):
    prefix = PREFIX

    def __init__(self) -> None:
        import django

        django.setup()
        import httpx

        from conveyor.broker import TaskSpec, get_broker

        self.url = os.environ["CONVEYOR_URL"]
        self.http = httpx.Client(base_url=self.url, timeout=60)
        self.broker = get_broker()
        self.spec = TaskSpec

    def reset(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE conveyor_task CASCADE")
        vacuum(os.environ["DATABASE_URL"])

    def enqueue(self, sent: float | None = None) -> None:
        payload = b"{}" if sent is None else json.dumps({"t": sent}).encode()
        self.broker.enqueue(self.spec(type="noop", payload=payload, queue=QUEUE))

    def enqueue_bulk(self, count: int) -> None:
        self.broker.enqueue_batch([self.spec(type="noop", payload=b"{}", queue=QUEUE) for _ in range(count)])

    def extra_enqueue(self, count: int) -> dict[str, float]:
        """The same over HTTP, through the SDK's Client (one keep-alive connection)."""
        from conveyor.sdk import Client, task_request

        out = {}
        with Client(self.url, timeout=60) as client:
            for _ in range(ROUND_WARMUP):
                client.enqueue("noop", {}, queue=QUEUE)
            start = time.perf_counter()
            for _ in range(count):
                client.enqueue("noop", {}, queue=QUEUE)
            out["sdk_one_per_s"] = count / (time.perf_counter() - start)
            size = min(self.bulk_size, count)
            batch = [task_request("noop", {}, queue=QUEUE) for _ in range(size)]
            client.enqueue_batch(batch)
            batches = max(3, count // size)  # a few samples even for --enqueue-tasks 1000
            for key, minimal in (("sdk_bulk_per_s", False), ("sdk_bulk_minimal_per_s", True)):
                start = time.perf_counter()
                for _ in range(batches):
                    client.enqueue_batch(batch, minimal=minimal)
                out[key] = batches * size / (time.perf_counter() - start)
        return out

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if not (variant.startswith("p") and variant[1:].isdigit()):
            raise SystemExit(f"conveyor: unknown variant {variant!r} (pN: prefetch N)")
        argv = [sys.executable, str(ROOT / "bench" / "worker_proc.py"), self.url, "--queues", f"{QUEUE}=1"]
        return popen([*argv, "--concurrency", str(slots), "--prefetch", variant[1:], "--count", PREFIX])

    def drained(self) -> None:
        """Every handler ran: wait for the node to have their acks committed."""
        deadline = time.time() + 60
        while self.unfinished():
            if time.time() > deadline:
                raise SystemExit("conveyor: the acks did not arrive")
            time.sleep(0.01)

    def unfinished(self) -> int:
        for q in self.http.get("/api/v1/queues").json()["queues"]:
            if q["name"] == QUEUE:
                return sum(q["counts"][s] for s in ("pending", "active", "retry", "scheduled"))
        return 0


if __name__ == "__main__":
    main(Conveyor())
