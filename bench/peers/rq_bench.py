"""RQ on Redis, for bench/compare.py (see bench/peers/driver.py).

Variant ``simple``: RQ's ``WorkerPool`` of SLOTS ``SimpleWorker`` processes
(bench/peers/rq_app.py). Bulk: ``Queue.enqueue_many``. Runs inside
bench/.peers (``make bench-peers``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.driver import System, main, popen
from bench.peers.rq_app import PREFIX, REDIS_URL, noop


class RQ(System):
    prefix = PREFIX

    def __init__(self) -> None:
        from rq import Queue

        self.connection = redis.Redis.from_url(REDIS_URL)
        self.queue = Queue(PREFIX, connection=self.connection)

    def reset(self) -> None:
        self.connection.flushdb()  # its own database of the run's private Redis

    def enqueue(self, sent: float | None = None) -> None:
        self.queue.enqueue(noop, sent)

    def enqueue_bulk(self, count: int) -> None:
        from rq import Queue

        self.queue.enqueue_many([Queue.prepare_data(noop, args=(None,)) for _ in range(count)])

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if variant != "simple":
            raise SystemExit(f"rq: unknown variant {variant!r}")
        return popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "rq_app.py"), str(slots)]
        )


if __name__ == "__main__":
    main(RQ())
