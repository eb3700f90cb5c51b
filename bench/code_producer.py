"""Enqueue from Django code at a steady rate (the producer of the latency runs).

    DATABASE_URL=... REDIS_URL=... python bench/code_producer.py QUEUE RATE COUNT [WARMUP]

The peers' producers call their client library (`delay()`, `defer()`);
Conveyor's equivalent is the broker called from Django code: an INSERT
committed to PostgreSQL, then a wake over the channel layer to the nodes.
Each payload carries {"t": send time, "tag": "warmup"|"code"} for
bench/worker_proc.py. One process, one thread, a fixed schedule: a slow
enqueue delays the next one, as the peers' producers do.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    import django

    django.setup()
    from conveyor.broker import TaskSpec, get_broker

    queue, rate, count = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    broker = get_broker()
    interval, next_at = 1.0 / rate, time.perf_counter()
    for i in range(warmup + count):
        tag = "warmup" if i < warmup else "code"
        payload = json.dumps({"t": time.time(), "tag": tag}).encode()
        broker.enqueue(TaskSpec(type="noop", payload=payload, queue=queue))
        next_at += interval
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)


if __name__ == "__main__":
    main()
