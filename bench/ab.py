"""Two builds of Conveyor side by side, alternated in one run (a script, not a test).

    .venv/bin/python bench/ab.py --checkout OLD_TREE --checkout NEW_TREE [--rounds 3]

Each tree is a checkout with its own ``.venv`` (``make venv`` there; a git
worktree of an older commit will do). Every round runs each build once,
the first build rotating from round to round, so the machine's drift falls
on both alike; the median round of each row is printed with the slowest
and fastest. Per build and round, on PostgreSQL + Redis:

* ``bench/broker_bench.py --round``: one-by-one enqueues from Django code
  through the process's broker (its wakes through Redis);
* ``bench/dispatch_bench.py --backends cluster --json``: one SDK producer's
  one-by-one HTTP enqueues, batches of 1,000, the drain, enqueue -> start
  latency over HTTP and from Django code, the node's CPU per enqueue, RSS.

Each build runs its own scripts against its own code and a database of its
own, migrated by that build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REDIS_URL, fresh_database

# (label, source, key, format); higher is better unless the label says ms or MB.
ROWS = [
    ("enqueue one by one, Django code (tasks/s)", "round", "per_s", "{:,.0f}"),
    ("enqueue one by one, SDK over HTTP (tasks/s)", "dispatch", "enqueue_one_sdk_per_s", "{:,.0f}"),
    ("node CPU per HTTP enqueue (ms)", "dispatch", "node_cpu_per_enqueue_ms", "{:.2f}"),
    ("enqueue one by one, 8 producers (tasks/s)", "dispatch", "enqueue_one_8_per_s", "{:,.0f}"),
    ("enqueue batch of 1000 over HTTP (tasks/s)", "dispatch", "enqueue_batch_per_s", "{:,.0f}"),
    ("drain, concurrency 50 (tasks/s)", "dispatch", "drain_per_s", "{:,.0f}"),
    ("latency p50 over HTTP (ms)", "dispatch", "latency_p50_ms", "{:.2f}"),
    ("latency p99 over HTTP (ms)", "dispatch", "latency_p99_ms", "{:.2f}"),
    ("latency p50 from Django code (ms)", "dispatch", "code_p50_ms", "{:.2f}"),
    ("latency p99 from Django code (ms)", "dispatch", "code_p99_ms", "{:.2f}"),
    ("worker peak RSS (MB)", "dispatch", "worker_rss_mb", "{:.0f}"),
]


def _run(argv: list[str], tree: Path, env: dict[str, str]) -> str:
    """Run one bench script of *tree*; its standard output (its error output shown if it fails)."""
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {tree} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def run_build(tree: Path, index: int, round_tasks: int, tasks: int, latency_tasks: int) -> dict[str, float]:
    python = str(tree / ".venv/bin/python")
    url = fresh_database("postgres", f"conveyor_ab_{index}", checkout=tree)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
    }
    env.pop("PYTHONPATH", None)
    one = _run([python, "bench/broker_bench.py", "--round", str(round_tasks)], tree, env)
    out = {"per_s": json.loads(one.strip().splitlines()[-1])["per_s"]}
    argv = [python, "bench/dispatch_bench.py", "--backends", "cluster", "--json", "--tasks", str(tasks)]
    argv += ["--latency-tasks", str(latency_tasks)]
    dispatch = _run(argv, tree, {k: v for k, v in env.items() if k != "DATABASE_URL"})
    cluster = json.loads(dispatch)["cluster"]
    out.update({k: float(v) for k, v in cluster.items() if isinstance(v, (int, float))})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", type=Path, required=True, help="a tree with its own .venv")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--round-tasks", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=10000, help="tasks drained per round")
    parser.add_argument("--latency-tasks", type=int, default=1000)
    args = parser.parse_args()
    trees = [t.resolve() for t in args.checkout]
    seen: dict[int, list[dict[str, float]]] = {i: [] for i in range(len(trees))}
    for r in range(args.rounds):
        order = [(r + k) % len(trees) for k in range(len(trees))]
        for i in order:
            result = run_build(trees[i], i, args.round_tasks, args.tasks, args.latency_tasks)
            seen[i].append(result)
            print(
                f"round {r + 1} build {i + 1}: " + json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True
            )
    names = [t.name for t in trees]
    print()
    print(f"{'row':46}" + "".join(f"{n:>28}" for n in names))
    for label, _source, key, fmt in ROWS:
        cells = []
        for i in range(len(trees)):
            values = [s[key] for s in seen[i] if key in s]
            if not values:
                cells.append(f"{'-':>28}")
                continue
            cell = f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"
            cells.append(f"{cell:>28}")
        print(f"{label:46}" + "".join(cells))


if __name__ == "__main__":
    main()
