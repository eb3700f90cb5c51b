"""A worker process for the browser tests, built on the public SDK only.

It serves every task type named in ``--types``; the payload says what to do:
``{"sleep": 2}``, ``{"progress": 40}`` (then sleeps until canceled),
``{"fail": true}``, ``{"skip": true}``, ``{"fail_times": 3}`` (fails its first
three attempts). Anything else completes at once with
a small result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import Any

from conveyor.sdk import AsyncWorker, SkipRetry, Task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queues", default="default=1", help="queue=weight,...")
    parser.add_argument("--types", default="demo")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--labels", default="{}", help="JSON object")
    args = parser.parse_args()

    queues = {q.split("=")[0]: int(q.split("=")[1]) for q in args.queues.split(",")}
    worker = AsyncWorker(
        args.url, queues=queues, concurrency=args.concurrency, labels=json.loads(args.labels), drain_timeout=2.0
    )

    async def handle(task: Task) -> Any:
        spec = task.payload if isinstance(task.payload, dict) else {}
        if spec.get("progress") is not None:
            task.progress(spec["progress"], spec.get("message", "working"))
            await asyncio.sleep(3600)
        if spec.get("sleep"):
            await asyncio.sleep(float(spec["sleep"]))
        if spec.get("skip"):
            raise SkipRetry(spec.get("error", "refused: bad input"))
        if spec.get("fail_times") and task.attempt <= int(spec["fail_times"]):
            raise RuntimeError(f"attempt {task.attempt} failed on purpose")
        if spec.get("fail"):
            raise RuntimeError(spec.get("error", "asked to fail"))
        return {"ok": True, "handled": task.type}

    for task_type in args.types.split(","):
        worker.task(task_type)(handle)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.stop_threadsafe)
        loop.add_signal_handler(signal.SIGINT, worker.stop_threadsafe)
        await worker.run()

    asyncio.run(run())


if __name__ == "__main__":
    main()
