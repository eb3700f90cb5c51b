"""A complete Conveyor worker. Run a node (`make run`), then:

    .venv/bin/python examples/worker.py

and enqueue with curl (see README) or `examples/enqueue.py`.
"""

from __future__ import annotations

import logging
import os
import time

from conveyor.sdk import SkipRetry, Task, Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

worker = Worker(
    os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"),
    queues={"default": 1, "email": 3},
    concurrency=8,
    token=os.environ.get("CONVEYOR_TOKEN"),
)


@worker.task("email:send")
def send_email(task: Task) -> dict[str, str]:
    to = task.payload.get("to")
    if not to:
        raise SkipRetry("no recipient")  # permanent: archived, no retries
    task.progress(50, "rendering")
    time.sleep(0.05)  # pretend to talk to an SMTP server
    logging.info("sent email %s to %s (attempt %d)", task.id, to, task.attempt)
    return {"delivered_to": to}


@worker.task("report:build")
async def build_report(task: Task) -> None:
    logging.info("building report %s with %s", task.id, task.payload)


if __name__ == "__main__":
    worker.run()
