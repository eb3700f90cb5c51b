"""One producer enqueuing one task per POST, and what each POST costs the node.

    .venv/bin/python bench/http_enqueue.py [--checkout DIR ...] [--rounds 2] [--posts 4000]

Starts a cluster node (PostgreSQL + Redis, fresh database) from each
checkout in turn (default: this one; give another build's working tree,
e.g. from ``git worktree add``, to compare builds side by side), sends
``--posts`` one-task POSTs from one producer on the standard library's
``http.client`` over one keep-alive connection (after 500 unmeasured), and
prints tasks/s and the node's CPU time per POST (user + system, from
``/proc``). The checkouts alternate, ``--rounds`` times, so a machine that
changes speed meanwhile weighs on each alike.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, cpu_seconds
from bench.dispatch_bench import Node, stdlib_enqueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", type=Path, help="a working tree to run the node from")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--posts", type=int, default=4000)
    args = parser.parse_args()
    checkouts = args.checkout or [ROOT]
    for round_ in range(1, args.rounds + 1):
        for checkout in checkouts:
            node = Node("cluster", checkout=checkout)
            try:
                stdlib_enqueue(node.url, 500)  # unmeasured: the node's first requests
                used = cpu_seconds(node.proc.pid)
                rate = stdlib_enqueue(node.url, args.posts)
                cpu_ms = (cpu_seconds(node.proc.pid) - used) / args.posts * 1000
            finally:
                node.stop()
            print(f"round {round_}  {checkout}: {rate:,.0f} tasks/s, node CPU {cpu_ms:.2f} ms per POST", flush=True)


if __name__ == "__main__":
    main()
