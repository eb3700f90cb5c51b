"""Two builds of Conveyor running at once, measured in short alternating blocks.

    .venv/bin/python bench/paired.py --checkout OLD_TREE --checkout NEW_TREE [--blocks 20]

bench/ab.py runs one build, then the other, a minute each: on a machine
whose speed drifts within minutes, a row that takes two seconds can land
on a slow moment for one build and not the other. Here both builds run
side by side the whole time, each its own node (``conveyord``), SDK worker
and producer (bench/paired_agent.py) on a database of its own, migrated by
that build, and the same Redis; the measurements alternate block by block
(a few seconds each, the first build rotating), so each block of one build
has a neighbour of the other a few seconds away. Per block and build:

* SDK over HTTP one by one: N one-task POSTs as fast as they go (tasks/s),
  and the node's CPU per POST;
* Django code one by one: N ``get_broker().enqueue`` calls (tasks/s);
* latency over HTTP and from Django code: enqueue -> handler start at
  ``--rate`` tasks/s on the idle worker (p50 and p99 of the block).

It prints each build's median block and, per row, the median of the
blocks' ratios (second build / first, each block against its neighbour)
with their quartiles: the ratio's spread is what the drift left.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import REDIS_URL, cpu_seconds, fresh_database, node_url, percentile, take_latency_log, vacuum

AGENT = Path(__file__).resolve().parent / "paired_agent.py"


class Build:
    """One tree's node, latency worker and producer, on a database of its own."""

    def __init__(self, tree: Path, index: int, concurrency: int) -> None:
        self.tree = tree
        python = str(tree / ".venv" / "bin" / "python")
        self.database_url = fresh_database("postgres", f"conveyor_paired_{index}", checkout=tree)
        self.env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "DJANGO_SETTINGS_MODULE": "conveyor_site.settings",
            "PYTHONUNBUFFERED": "1",
            "REDIS_URL": REDIS_URL,
            "CONVEYOR_ALLOW_UNAUTHENTICATED": "1",
            "DJANGO_SECRET_KEY": "bench-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH",
            "CONVEYOR_CHANNEL_PREFIX": f"paired{uuid.uuid4().hex[:6]}",
            "CONVEYOR_LOG_LEVEL": os.environ.get("BENCH_NODE_LOG_LEVEL", "WARNING"),
        }
        self.log = tempfile.NamedTemporaryFile("w+", prefix="conveyor-paired-node-", suffix=".log", delete=False)  # noqa: SIM115 (lives as long as the node)
        self.node = subprocess.Popen(
            [python, "manage.py", "conveyord", "--port", "0"],
            cwd=tree,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self.url = node_url(self.node, self.log.name, f"node of {self.tree}")
        except BaseException:
            self.node.kill()
            raise
        self.latency_log = tempfile.mktemp(prefix="conveyor-paired-latency-")
        worker = [python, "bench/worker_proc.py", self.url, "--queues", "lat=1,code=1"]
        worker += ["--concurrency", str(concurrency), "--latency-log", self.latency_log]
        self.worker = subprocess.Popen(
            worker,
            cwd=tree,
            env=self.env,
        )
        self.agent = subprocess.Popen(
            [python, str(AGENT), self.url],
            cwd=tree,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, kind: str, n: int, queue: str, tag: str, rate: float) -> float:
        """Seconds the agent took for *n* enqueues."""
        assert self.agent.stdin is not None and self.agent.stdout is not None
        self.agent.stdin.write(f"{kind} {n} {queue} {tag} {rate}\n")
        self.agent.stdin.flush()
        answer = self.agent.stdout.readline()
        if not answer:
            raise SystemExit(f"the producer of {self.tree} exited")
        return float(answer)

    def stop(self) -> list[list[str]]:
        """Stop everything; the latency log's lines."""
        if self.agent.stdin is not None:
            self.agent.stdin.close()
        time.sleep(1.0)  # the last block's tasks reach the worker
        for proc in (self.agent, self.worker, self.node):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        return take_latency_log(self.latency_log) if Path(self.latency_log).exists() else []


ROWS = [  # (label, key, format); higher is better unless the label says ms
    ("enqueue one by one, SDK over HTTP (tasks/s)", "http_per_s", "{:,.0f}"),
    ("node CPU per HTTP enqueue (ms)", "node_cpu_ms", "{:.3f}"),
    ("enqueue one by one, Django code (tasks/s)", "code_per_s", "{:,.0f}"),
    ("latency p50 over HTTP (ms)", "h_p50", "{:.2f}"),
    ("latency p99 over HTTP (ms)", "h_p99", "{:.2f}"),
    ("latency p50 from Django code (ms)", "c_p50", "{:.2f}"),
    ("latency p99 from Django code (ms)", "c_p99", "{:.2f}"),
    # From the task's enqueued_at (the broker's clock as it validated the
    # task, before its INSERT) to the handler's start: the rest of each
    # latency is the producer's and the request's.
    ("  of it from enqueued_at, p50 over HTTP (ms)", "h_node_p50", "{:.2f}"),
    ("  of it from enqueued_at, p50 from Django code (ms)", "c_node_p50", "{:.2f}"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", type=Path, required=True, help="a tree with its own .venv")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--enqueues", type=int, default=500, help="one-by-one enqueues per block and kind")
    parser.add_argument("--latency-tasks", type=int, default=200, help="latency samples per block and kind")
    parser.add_argument("--rate", type=float, default=100.0, help="tasks/s of the latency blocks")
    parser.add_argument("--concurrency", type=int, default=50, help="the latency worker's")
    args = parser.parse_args()
    if len(args.checkout) != 2:
        raise SystemExit("--checkout: give exactly two trees")
    builds: list[Build] = []
    seen: list[list[dict[str, float]]] = [[], []]
    try:
        for i, tree in enumerate(args.checkout):
            builds.append(Build(tree.resolve(), i, args.concurrency))
        for b in builds:  # one unmeasured block each: imports, connections, prepared statements
            b.run("http", 200, "single", "warmup", 0)
            b.run("code", 200, "single", "warmup", 0)
            b.run("http", 50, "lat", "warmup", args.rate)
            b.run("code", 50, "code", "warmup", args.rate)
        for k in range(args.blocks):
            for i in (k % 2, 1 - k % 2):
                b, out = builds[i], {}
                used = cpu_seconds(b.node.pid)
                out["http_per_s"] = args.enqueues / b.run("http", args.enqueues, "single", "x", 0)
                out["node_cpu_ms"] = (cpu_seconds(b.node.pid) - used) / args.enqueues * 1000
                out["code_per_s"] = args.enqueues / b.run("code", args.enqueues, "single", "x", 0)
                b.run("http", args.latency_tasks, "lat", f"h{k}", args.rate)
                b.run("code", args.latency_tasks, "code", f"c{k}", args.rate)
                seen[i].append(out)
            print(
                f"block {k + 1}/{args.blocks}: "
                + "  ".join(
                    f"{b.tree.name} {seen[i][-1]['http_per_s']:,.0f}/{seen[i][-1]['code_per_s']:,.0f} per s"
                    for i, b in enumerate(builds)
                ),
                flush=True,
            )
            if k % 5 == 4:
                for b in builds:
                    vacuum(b.database_url)
    finally:
        logs = [b.stop() for b in builds]
    for i, lines in enumerate(logs):
        for k in range(args.blocks):
            for tag, key in (("h", "h"), ("c", "c")):
                rows = [p for p in lines if len(p) > 2 and p[1] == f"{tag}{k}"]
                if rows:
                    samples = [float(p[0]) * 1000 for p in rows]
                    seen[i][k][f"{key}_p50"] = percentile(samples, 50)
                    seen[i][k][f"{key}_p99"] = percentile(samples, 99)
                    seen[i][k][f"{key}_node_p50"] = percentile([float(p[2]) * 1000 for p in rows], 50)
    names = [b.tree.name for b in builds]
    print()
    print(f"{'row':52}{names[0]:>14}{names[1]:>14}   ratio, median (quartiles)   blocks better")
    for label, key, fmt in ROWS:
        pairs = [(a[key], b[key]) for a, b in zip(seen[0], seen[1], strict=True) if key in a and key in b]
        if not pairs:
            continue
        ratios = sorted(new / old for old, new in pairs)
        q1, q2, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
        higher_better = "ms" not in label
        better = sum(1 for r in ratios if (r > 1) == higher_better and r != 1)
        print(
            f"{label:52}{fmt.format(statistics.median(p[0] for p in pairs)):>14}"
            f"{fmt.format(statistics.median(p[1] for p in pairs)):>14}"
            f"   {q2:.3f} ({q1:.3f}-{q3:.3f}){better:>10}/{len(ratios)}"
        )


if __name__ == "__main__":
    main()
