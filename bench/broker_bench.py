"""Broker throughput on SQLite and PostgreSQL (a script, not a test).

    .venv/bin/python bench/broker_bench.py [--backends sqlite,postgres] [--tasks 5000]

Prints, per database: enqueue one-by-one tasks/s, enqueue batch tasks/s,
and lease+ack tasks/s at batch sizes 1, 10 and 100. Every operation is a
real committed transaction through the broker (the same code a node runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, fresh_database, rate, timed


def run_inner(tasks: int) -> dict[str, float]:
    import django

    django.setup()
    from conveyor.broker import Broker, TaskSpec
    from conveyor.broker.hooks import BrokerHooks

    broker = Broker(hooks=BrokerHooks())
    results: dict[str, float] = {}

    def one_by_one() -> int:
        n = min(tasks, 2000)
        for _ in range(n):
            broker.enqueue(TaskSpec(type="bench", payload=b"{}", queue="one"))
        return n

    count, seconds = timed(one_by_one)
    results["enqueue_one"] = count / seconds

    def batched() -> int:
        for _ in range(tasks // 1000):
            broker.enqueue_batch([TaskSpec(type="bench", payload=b"{}", queue="lease") for _ in range(1000)])
        return tasks // 1000 * 1000

    count, seconds = timed(batched)
    results["enqueue_batch"] = count / seconds

    for size in (1, 10, 100):
        budget = min(tasks, 1000 if size == 1 else 3000)

        def lease_ack(size: int = size, budget: int = budget) -> int:
            done = 0
            while done < budget:
                leased = broker.lease("lease", size).tasks
                if not leased:
                    break
                broker.ack_many([(t, None) for t in leased])
                done += len(leased)
            return done

        count, seconds = timed(lease_ack)
        results[f"lease_ack_{size}"] = count / seconds
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tasks", type=int, default=10000)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(run_inner(args.tasks)))
        return
    rows = []
    for backend in args.backends.split(","):
        url = fresh_database(backend)
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "conveyor_site.settings"}
        out = subprocess.run(
            [sys.executable, __file__, "--inner", "--tasks", str(args.tasks)], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        rows.append((backend, json.loads(out.stdout.strip().splitlines()[-1])))
    columns = ["enqueue_one", "enqueue_batch", "lease_ack_1", "lease_ack_10", "lease_ack_100"]
    print(f"{'backend':10}" + "".join(f"{c:>16}" for c in columns))
    for backend, result in rows:
        print(f"{backend:10}" + "".join(f"{rate(int(result[c]), 1.0):>16}" for c in columns))


if __name__ == "__main__":
    main()
