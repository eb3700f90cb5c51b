"""One producer enqueuing one task per POST: what each POST costs the node, or the producer.

    .venv/bin/python bench/http_enqueue.py [--checkout DIR ...] [--rounds 2] [--posts 4000]
    .venv/bin/python bench/http_enqueue.py --producer [--checkout DIR ...] [--rounds 3] [--posts 4000]

Starts a cluster node (PostgreSQL + Redis, fresh database) and sends
``--posts`` one-task POSTs from one producer over one keep-alive
connection, after 500 unmeasured ones.

Without ``--producer``: a node from each checkout in turn (default: this
one; give another build's working tree, e.g. from ``git worktree add``, to
compare builds side by side), the producer on the standard library's
``http.client``, sending one fixed body; prints tasks/s and the node's CPU
time per POST (user + system, from ``/proc``).

``--producer``: one node (this checkout's), and the producers compared:
the SDK's ``Client.enqueue`` (``sdk``) and ``AsyncClient.enqueue``
awaited one at a time (``async``) from each checkout (e.g. the build
before a change of its HTTP library), and, as the baseline,
``httpx.Client`` posting the same body (``httpx``). Each producer is a
process of its own (bench/sdk_producer.py); prints tasks/s and the
producer's CPU time per call (its process's user + system time over the
measured loop, all threads).

Either way the variants alternate, ``--rounds`` times, so a machine that
changes speed meanwhile weighs on each alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, cpu_seconds
from bench.dispatch_bench import Node, stdlib_enqueue

WARMUP = 500
PRODUCER = Path(__file__).with_name("sdk_producer.py")


def node_rounds(checkouts: list[Path], rounds: int, posts: int) -> None:
    for round_ in range(1, rounds + 1):
        for checkout in checkouts:
            node = Node("cluster", checkout=checkout)
            try:
                stdlib_enqueue(node.url, WARMUP)  # unmeasured: the node's first requests
                used = cpu_seconds(node.proc.pid)
                rate = stdlib_enqueue(node.url, posts)
                cpu_ms = (cpu_seconds(node.proc.pid) - used) / posts * 1000
            finally:
                node.stop()
            print(f"round {round_}  {checkout}: {rate:,.0f} tasks/s, node CPU {cpu_ms:.2f} ms per POST", flush=True)


def produce(checkout: Path, kind: str, url: str, posts: int) -> dict[str, float]:
    """Run one producer process; return its tasks/s and CPU µs per call."""
    argv = [sys.executable, str(PRODUCER), str(checkout), kind, url, str(posts), str(WARMUP)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def producer_rounds(checkouts: list[Path], rounds: int, posts: int) -> None:
    variants = [(checkout, kind) for kind in ("sdk", "async") for checkout in checkouts] + [(checkouts[0], "httpx")]
    node = Node("cluster")
    try:
        for round_ in range(1, rounds + 1):
            for checkout, kind in variants:
                got = produce(checkout, kind, node.url, posts)
                label = {"sdk": "Client", "async": "AsyncClient", "httpx": "httpx.Client"}[kind]
                label += f" ({checkout})" if kind != "httpx" else ""
                print(
                    f"round {round_}  {label}: {got['rate']:,.0f} tasks/s, producer CPU {got['cpu_us']:.0f} µs per call",
                    flush=True,
                )
    finally:
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", type=Path, help="a working tree to run the node (or SDK) from")
    parser.add_argument("--producer", action="store_true", help="compare producers (SDK, httpx) against one node")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--posts", type=int, default=4000)
    args = parser.parse_args()
    checkouts = args.checkout or [ROOT]
    if args.producer:
        producer_rounds(checkouts, args.rounds, args.posts)
    else:
        node_rounds(checkouts, args.rounds, args.posts)


if __name__ == "__main__":
    main()
