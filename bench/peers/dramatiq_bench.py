"""Dramatiq on Redis, for bench/compare.py (see bench/peers/driver.py).

Variant ``procs``: ``dramatiq --processes P --threads T``, P x T = SLOTS,
P the largest divisor of SLOTS up to the machine's cores. Dramatiq has no
bulk enqueue. Runs inside bench/.peers (``make bench-peers``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.peers.dramatiq_app import PREFIX, REDIS_URL, noop
from bench.peers.driver import System, main, popen


class Dramatiq(System):
    prefix = PREFIX
    has_bulk = False

    def reset(self) -> None:
        redis.Redis.from_url(REDIS_URL).flushdb()  # its own database of the run's private Redis

    def enqueue(self, sent: float | None = None) -> None:
        noop.send(sent)

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if variant != "procs":
            raise SystemExit(f"dramatiq: unknown variant {variant!r}")
        cores = os.cpu_count() or 1
        processes = max(d for d in range(1, min(slots, cores) + 1) if slots % d == 0)
        threads = slots // processes
        argv = [sys.executable, "-m", "dramatiq", "bench.peers.dramatiq_app", "--queues", PREFIX]
        return popen([*argv, "--processes", str(processes), "--threads", str(threads)])


if __name__ == "__main__":
    main(Dramatiq())
