"""A worker process for bench/chaos.py, built on the public SDK only.

    python bench/chaos_worker.py URL --log FILE [--concurrency 8] [--queues chaos=1]

Handlers:

* ``chaos``: sleeps ``payload["ms"]`` milliseconds;
* ``poison``: ends its own process at once (``os._exit``), as a handler that
  crashes the interpreter or runs out of memory would.

Each handler appends ``start``, then ``done`` (or ``cancel`` when the SDK
stops it) lines of ``event task_id attempt pid unix_time lease_id`` to ``--log``. Every
line is one ``write`` on a descriptor opened with ``O_APPEND``: the kernel
holds it once the call returns, so a SIGKILL a moment later loses no line,
and the ``done`` line is written before the handler returns, so before its
result can reach the node.
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


class CompletionLog:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.pid = os.getpid()

    def write(self, event: str, task: Task) -> None:
        line = f"{event} {task.id} {task.attempt} {self.pid} {time.time():.6f} {task.lease_id}\n"
        os.write(self.fd, line.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--log", required=True)
    parser.add_argument("--queues", default="chaos=1")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    queues = {q.split("=")[0]: int(q.split("=")[1]) for q in args.queues.split(",")}
    log = CompletionLog(args.log)
    worker = AsyncWorker(args.url, queues=queues, concurrency=args.concurrency, drain_timeout=10)

    @worker.task("chaos")
    async def chaos(task: Task) -> None:
        log.write("start", task)
        try:
            await asyncio.sleep(task.payload.get("ms", 10) / 1000)
        except asyncio.CancelledError:
            log.write("cancel", task)
            raise
        log.write("done", task)

    @worker.task("poison")
    def poison(task: Task) -> None:
        log.write("start", task)
        os._exit(3)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.stop_threadsafe)
        await worker.run()

    asyncio.run(run())


if __name__ == "__main__":
    main()
