"""Celery 5 on Redis, for bench/compare.py (see bench/peers/driver.py).

Variants: ``threads`` (``-P threads -c SLOTS``) and ``prefork``
(``-P prefork -c SLOTS``). Celery has no bulk enqueue. Runs inside
bench/.peers (``make bench-peers``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.celery_app import PREFIX, REDIS_URL, noop
from bench.peers.driver import System, main, popen


class Celery(System):
    prefix = PREFIX
    has_bulk = False

    def reset(self) -> None:
        redis.Redis.from_url(REDIS_URL).flushdb()  # its own database of the run's private Redis

    def enqueue(self, sent: float | None = None) -> None:
        noop.delay(sent)

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if variant not in ("threads", "prefork"):
            raise SystemExit(f"celery: unknown variant {variant!r}")
        argv = [sys.executable, "-m", "celery", "-A", "bench.peers.celery_app", "worker", "-P", variant]
        argv += ["-c", str(slots), "-Q", PREFIX, "--without-gossip", "--without-mingle", "--without-heartbeat"]
        return popen([*argv, "-l", "WARNING"])


if __name__ == "__main__":
    main(Celery())
