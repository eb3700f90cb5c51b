"""The Celery side of the comparison: a no-op task on Redis, acks late (at-least-once)."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX = os.environ.get("BENCH_PREFIX", "celerybench")

app = Celery("celerybench", broker=REDIS_URL)
app.conf.update(
    task_ignore_result=True,
    task_acks_late=True,  # closest to Conveyor's at-least-once
    worker_prefetch_multiplier=4,
    task_default_queue=PREFIX,
    broker_connection_retry_on_startup=True,
)
# Completion counts and latency samples: on the broker's Redis unless told
# otherwise (the fsync run keeps them off the broker it measures).
counter = redis.Redis.from_url(os.environ.get("BENCH_COUNTER_URL", REDIS_URL))


@app.task(name="noop")
def noop(sent: float | None = None) -> None:
    if sent is not None:
        counter.rpush(f"{PREFIX}:latency", time.time() - sent)
    # First and last completion times: the drain is timed between them, so
    # the worker's start-up is neither counted nor hidden.
    now = time.time()
    pipe = counter.pipeline(transaction=False)
    pipe.setnx(f"{PREFIX}:first", now)
    pipe.set(f"{PREFIX}:last", now)
    pipe.incr(f"{PREFIX}:done")
    pipe.execute()
