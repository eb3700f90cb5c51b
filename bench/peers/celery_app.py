"""The Celery side of the comparison: a no-op task on Redis, acks late (at-least-once),
prefetch at Celery's default (4 per slot), results ignored."""

from __future__ import annotations

import os
import sys

from celery import Celery

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.driver import count_done, counter_client

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX = "celerybench"

app = Celery("celerybench", broker=REDIS_URL)
app.conf.update(
    task_ignore_result=True,
    task_acks_late=True,  # closest to Conveyor's at-least-once
    task_default_queue=PREFIX,
    broker_connection_retry_on_startup=True,
)
counter = counter_client()


@app.task(name="noop")
def noop(sent: float | None = None) -> None:
    count_done(counter, PREFIX, sent)
