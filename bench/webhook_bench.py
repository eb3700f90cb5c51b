"""Webhook drain throughput: a real node delivering to the example endpoint.

    .venv/bin/python bench/webhook_bench.py [--backends dev,cluster] [--tasks 5000] [--concurrency 50]

Tasks are queued while the registration is paused, then it is resumed and
the time until the queue is empty is measured. Every delivery is a signed
JSON-RPC POST answered "completed" by examples/webhook_endpoint.py.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT
from bench.dispatch_bench import Node


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(backend: str, tasks: int, concurrency: int) -> float:
    # The example endpoint listens on loopback, which a production node
    # refuses as a target unless private targets are allowed.
    os.environ["CONVEYOR_WEBHOOKS_ALLOW_PRIVATE_TARGETS"] = "1"
    node = Node(backend)
    port = free_port()
    endpoint = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples" / "webhook_endpoint.py"),
            "--port",
            str(port),
            "--conveyor",
            node.url,
            "--quiet",
        ],
        env={**os.environ, "WEBHOOK_SECRET": "bench-secret"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        registration = {
            "name": "bench",
            "url": f"http://127.0.0.1:{port}/tasks",
            "queues": {"hooks": 1},
            "concurrency": concurrency,
            "secrets": ["bench-secret"],
            "paused": True,
        }
        node.http.post("/api/v1/webhooks", json=registration).raise_for_status()
        for _ in range(tasks // 1000):
            node.http.post(
                "/api/v1/tasks/batch",
                json={"tasks": [{"type": "noop", "queue": "hooks", "json": {}} for _ in range(1000)]},
            )
        start = time.perf_counter()
        node.http.post("/api/v1/webhooks/bench/resume").raise_for_status()
        deadline = time.time() + 600
        while node.unfinished("hooks"):
            if time.time() > deadline:
                status = node.http.get("/api/v1/webhooks").json()["webhooks"][0]["status"]
                raise SystemExit(f"the queue did not drain; last error: {status.get('last_error')}")
            time.sleep(0.1)
        return (tasks // 1000 * 1000) / (time.perf_counter() - start)
    finally:
        endpoint.kill()
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="dev,cluster")
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        rate = run(backend, args.tasks, args.concurrency)
        print(f"{backend:8} webhook drain of {args.tasks:,} tasks, concurrency {args.concurrency}: {rate:,.0f} tasks/s")


if __name__ == "__main__":
    main()
