"""A benchmark worker: no-op async handler; records start latency when asked.

    python bench/worker_proc.py URL --queues drain=1 --concurrency 25 [--prefetch N]
        [--latency-log FILE] [--count PREFIX]

With --latency-log, each task's payload carries {"t": <client send time>}
and the worker writes "latency tag server_latency" per task (seconds; tag
"idle" or "steady"; server_latency counts from the node's enqueue commit).
With --count, each task does what every system's no-op does in
bench/compare.py (bench/peers/driver.py's ``count_done``, on
``BENCH_COUNTER_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from conveyor.sdk import AsyncWorker, Task
from conveyor.sdk.worker import DEFAULT_PREFETCH


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--queues", default="drain=1")
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--prefetch", type=int, default=DEFAULT_PREFETCH)
    parser.add_argument("--latency-log")
    parser.add_argument("--count", metavar="PREFIX")
    args = parser.parse_args()
    queues = {q.split("=")[0]: int(q.split("=")[1]) for q in args.queues.split(",")}
    worker = AsyncWorker(args.url, queues=queues, concurrency=args.concurrency, prefetch=args.prefetch)
    samples: list[str] = []
    if args.count:
        from bench.peers.driver import count_done, counter_client

        counter = counter_client()

    @worker.task("noop")
    async def noop(task: Task) -> None:
        if args.count:
            count_done(counter, args.count, task.payload.get("t") if isinstance(task.payload, dict) else None)
        if args.latency_log:
            now = time.time()
            sent = task.payload.get("t") if isinstance(task.payload, dict) else None
            tag = task.payload.get("tag", "") if isinstance(task.payload, dict) else ""
            server = now - task.enqueued_at.timestamp() if task.enqueued_at else -1
            samples.append(f"{now - sent if sent else -1:.6f} {tag or 'steady'} {server:.6f}")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.stop_threadsafe)
        await worker.run()

    asyncio.run(run())
    if args.latency_log:
        with open(args.latency_log, "w") as f:
            f.write("\n".join(samples) + "\n")


if __name__ == "__main__":
    main()
