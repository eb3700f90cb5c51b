"""A complete Conveyor worker (docs/sdk.md walks through it). Start a node (`make run`), then:

    .venv/bin/python examples/worker.py
    .venv/bin/python examples/enqueue.py ada@example.com      # in another shell

CONVEYOR_URL (default http://127.0.0.1:8080) and CONVEYOR_TOKEN say where and how to
connect. Ctrl-C or SIGTERM drains: running tasks get up to 30 s to finish, then it exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from conveyor.sdk import SkipRetry, Task, Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

worker = Worker(
    os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"),
    token=os.environ.get("CONVEYOR_TOKEN"),
    queues={"default": 1, "email": 3},  # of the 8 slots, 2 serve "default" and 6 serve "email"
    concurrency=8,
)


@worker.task("email:send")
def send_email(task: Task) -> dict[str, str]:
    """A sync handler: runs in a thread. Its return value is stored as the task's result."""
    to = task.payload.get("to")
    if not to:
        raise SkipRetry("no recipient")  # permanent: archived now, no retries spent
    for percent in (25, 50, 75):
        if task.cancelled:  # canceled, lease lost or past the deadline: the outcome is
            return {}  # already reported (and this value ignored); just stop working
        task.progress(percent, "talking to the SMTP server")
        time.sleep(0.02)
    logging.info("sent email %s to %s (attempt %d of %d)", task.id, to, task.attempt, task.max_retry + 1)
    return {"delivered_to": to}


@worker.task("report:build")
async def build_report(task: Task) -> str:
    """An async handler: runs on the event loop; a cancel raises CancelledError inside it."""
    for step in range(1, 4):
        await asyncio.sleep(0.1)
        task.progress(step * 33, f"step {step} of 3")
    return f"report for {task.payload!r}"


@worker.batch("digest:add")
def add_to_digest(tasks: list[Task]) -> dict[str, object]:
    """A batch handler: a fired group of "digest:add" tasks arrives as one list.

    Answer per task: a value is its result, an exception fails it (``SkipRetry``
    archives it); tasks left out succeed with no result.
    """
    outcome: dict[str, object] = {}
    for task in tasks:
        line = task.payload.get("line") if isinstance(task.payload, dict) else None
        outcome[task.id] = SkipRetry("no line") if not line else f"added {line!r}"
    logging.info("digest of %d lines", len(tasks))
    return outcome


@worker.task("digest:add")
def add_one_to_digest(task: Task) -> object:
    """Group members that were retried or released come back one at a time."""
    answer = add_to_digest([task])[task.id]
    if isinstance(answer, Exception):
        raise answer
    return answer


if __name__ == "__main__":
    worker.run()
