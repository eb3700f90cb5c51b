"""The Dramatiq side of the comparison: a no-op actor on the Redis broker, no retries."""

from __future__ import annotations

import os
import sys

import dramatiq
from dramatiq.brokers.redis import RedisBroker

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.driver import count_done, counter_client

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX = "dramatiqbench"

broker = RedisBroker(url=REDIS_URL)
dramatiq.set_broker(broker)
_counter = None


@dramatiq.actor(queue_name=PREFIX, max_retries=0)
def noop(sent: float | None = None) -> None:
    global _counter
    if _counter is None:
        _counter = counter_client()
    count_done(_counter, PREFIX, sent)
