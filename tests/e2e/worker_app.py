"""A worker process for end-to-end tests, built on the public SDK only.

Every task's payload says what to do: ``{"sleep": 0.1}``, ``{"sleep_first": 60}``
(first attempt only), ``{"hang_in": pid}`` (the worker process with that pid
sleeps an hour, any other goes on at once), ``{"fail": true}``, ``{"fail_with": "text"}`` (first attempt
only), ``{"echo": value}`` (the result carries it), ``{"skip": true}``,
``{"exit": true}`` (the process dies at once, as a crash would), ``{"wait_cancel": true}``, ``{"progress": 50}``. Each
start and finish is appended as a JSON line to ``--log`` (one file per
process), and, with ``--record-dsn``, each execution is inserted into the
PostgreSQL table ``e2e_executions``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from typing import Any

from conveyor.sdk import AsyncWorker, SkipRetry, Task


class Log:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 (kept open for the process)
        self._lock = threading.Lock()

    def write(self, event: str, task: Task, **extra: Any) -> None:
        line = json.dumps(
            {
                "event": event,
                "task": task.id,
                "type": task.type,
                "queue": task.queue,
                "attempt": task.attempt,
                "pid": os.getpid(),
                "t": time.time(),
                "key": (task.payload or {}).get("key") if isinstance(task.payload, dict) else None,
                "payload": task.raw_payload[:300].decode("utf-8", "replace"),  # what the handler was given
                **extra,
            }
        )
        with self._lock:
            self._file.write(line + "\n")


class Recorder:
    """Batch inserts of executed task ids into Postgres."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pending: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True).start()

    def add(self, task_id: str) -> None:
        with self.lock:
            self.pending.append((task_id, os.getpid()))

    def _loop(self) -> None:
        while True:
            time.sleep(0.05)
            self.flush()

    def flush(self) -> None:
        with self.lock:
            rows, self.pending = self.pending, []
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO e2e_executions (task_id, pid) VALUES (%s, %s)", rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queues", default="default=1")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--log", required=True)
    parser.add_argument("--token")
    parser.add_argument("--drain-timeout", type=float, default=30.0)
    parser.add_argument("--record-dsn")
    parser.add_argument("--batch-types", default="")
    # No window unless a test asks: these tests count a worker's credit (its
    # offers, what it holds) as its concurrency.
    parser.add_argument("--prefetch", type=int, default=0)
    args = parser.parse_args()

    queues = {q.split("=")[0]: int(q.split("=")[1]) for q in args.queues.split(",")}
    log = Log(args.log)
    recorder = Recorder(args.record_dsn) if args.record_dsn else None
    worker = AsyncWorker(
        args.url,
        queues=queues,
        concurrency=args.concurrency,
        token=args.token,
        drain_timeout=args.drain_timeout,
        prefetch=args.prefetch,
    )

    async def handle(task: Task) -> Any:
        spec = task.payload if isinstance(task.payload, dict) else {}
        log.write("start", task)
        if recorder is not None:
            recorder.add(task.id)
        if spec.get("exit"):
            os._exit(3)  # no result, no close frame: the server sees the connection drop
        try:
            if spec.get("progress") is not None:
                task.progress(spec["progress"], "halfway")
            if spec.get("wait_cancel"):
                await asyncio.sleep(3600)
            if spec.get("hang_in") == os.getpid():
                await asyncio.sleep(3600)
            if spec.get("sleep_first") and task.attempt == 1:
                await asyncio.sleep(spec["sleep_first"])
            if spec.get("sleep"):
                await asyncio.sleep(spec["sleep"])
            if spec.get("skip"):
                raise SkipRetry("asked to skip")
            if spec.get("fail"):
                raise RuntimeError("asked to fail")
            if spec.get("fail_with") and task.attempt == 1:
                raise RuntimeError(spec["fail_with"])
        except asyncio.CancelledError:
            log.write("cancelled", task, reason=task.cancel_reason)
            raise
        log.write("done", task)
        if spec.get("echo") is not None:
            return {"pid": os.getpid(), "echo": spec["echo"]}
        return {"pid": os.getpid()}

    def handle_batch(tasks: list[Task]) -> None:
        for task in tasks:
            log.write("batch", task, size=len(tasks))

    for task_type in ("e2e", "other"):
        worker.task(task_type)(handle)
    for task_type in filter(None, args.batch_types.split(",")):
        worker.batch(task_type)(handle_batch)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        import signal

        loop.add_signal_handler(signal.SIGTERM, worker.stop_threadsafe)
        loop.add_signal_handler(signal.SIGINT, worker.stop_threadsafe)
        await worker.run()

    asyncio.run(run())
    if recorder is not None:
        recorder.flush()


if __name__ == "__main__":
    main()
