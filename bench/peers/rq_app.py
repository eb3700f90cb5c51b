"""The RQ side of the comparison: the no-op task, and a pool of SimpleWorkers.

python bench/peers/rq_app.py SLOTS     # WorkerPool of SLOTS SimpleWorkers, until SIGTERM
"""

from __future__ import annotations

import os
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.driver import count_done, counter_client

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX = "rqbench"
_counter = None


def noop(sent: float | None = None) -> None:
    global _counter
    if _counter is None:
        _counter = counter_client()
    count_done(_counter, PREFIX, sent)


if __name__ == "__main__":
    from rq.worker import SimpleWorker
    from rq.worker_pool import WorkerPool

    # SimpleWorker runs each job in the worker's process (the default Worker
    # forks a child per job); the pool gives SLOTS of them.
    pool = WorkerPool(
        [PREFIX], connection=redis.Redis.from_url(REDIS_URL), num_workers=int(sys.argv[1]), worker_class=SimpleWorker
    )
    pool.start(logging_level="WARNING")
