"""Where enqueue -> start goes, hop by hop, from a traced run of bench/steady_cpu.py.

    git worktree add /tmp/trace HEAD && cd /tmp/trace
    git apply bench/trace/latency_trace.patch      # marks; never commit them
    mkdir -p /tmp/trlog && rm -f /tmp/trlog/*
    CONVEYOR_TRACE_DIR=/tmp/trlog /work/main/.venv/bin/python bench/steady_cpu.py
    /work/main/.venv/bin/python bench/trace/analyze.py /tmp/trlog

The patch makes the producer, the node and the worker append
``time.time()`` marks at each step and write them to one file per process
at exit (all three run on this machine, one clock). A task is followed by
the send time in its payload: the producer marks when its enqueue returned,
the node marks each task it queues for a worker. Steps between them that do
not carry the task (the wake, the lease, an offer's INSERT and
notification, the write, the worker's receive) are matched as the first
such mark after the previous step, which holds at
a steady rate well below saturation (one task at a time in flight). Prints
p50 / p90 / p99 per step.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
import sys
from pathlib import Path

STEPS = [  # between successive marks of a task's chain, in order
    "enqueue: INSERT committed",
    "PUBLISH to the node's Redis reader",
    "Redis reader to dispatcher wake",
    "wake to lease sent",
    "lease (PostgreSQL round trip)",
    "lease answer to frame queued",
    "frame queued to written",
    "socket to worker's WebSocket reader",
    "worker's reader to its receive loop",
]
OFFER_STEPS = [  # a task that took a node's offer (docs/architecture.md, "Offers")
    "enqueue: stamped to INSERT sent",
    "INSERT (taking an offer) to notification",
    "notification to frame queued",
    "frame queued to written",
    "socket to worker's WebSocket reader",
    "worker's reader to its receive loop",
]


def read(directory: str) -> dict[str, list[tuple[float, list[str]]]]:
    events: dict[str, list[tuple[float, list[str]]]] = {}
    for path in Path(directory).glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                events.setdefault(parts[1], []).append((float(parts[0]), parts[2:]))
    return events


def main() -> None:
    events = read(sys.argv[1])
    times = {k: sorted(t for t, _ in v) for k, v in events.items()}
    big_writes = sorted(t for t, args in events.get("tw_write", []) if int(args[0]) > 300)  # frames, not acks

    def after(name: str, t: float | None, pool: list[float] | None = None) -> float | None:
        arr = pool if pool is not None else times.get(name, [])
        i = bisect.bisect_left(arr, t) if t is not None else len(arr)
        return arr[i] if i < len(arr) else None

    def before(name: str, t: float) -> float | None:
        arr = times.get(name, [])
        i = bisect.bisect_right(arr, t)
        return arr[i - 1] if i else None

    queued = {float(args[0]): t for t, args in events.get("q", [])}
    sent = [float(args[0]) for _, args in events.get("pdone", [])]
    steps: dict[str, list[float]] = {label: [] for label in [*STEPS, *OFFER_STEPS]}
    total: list[float] = []
    offered = 0
    for t0 in sent:
        q = queued.get(t0)
        if q is None:
            continue
        note = before("note", q)
        tw = after("", q, big_writes)
        wd = after("ws_data", tw)
        recv = after("recv", wd)
        if note is not None and note > t0:  # it took an offer: no wake, no lease
            labels, chain = OFFER_STEPS, [t0, after("ins0", t0), note, q, tw, wd, recv]
        else:
            pub = after("pub0", t0)
            rx = after("rx", pub)
            wake = after("wake", rx)
            ls = before("ls", q)
            labels, chain = STEPS, [t0, pub, rx, wake, ls, after("le", ls), q, tw, wd, recv]
        if any(c is None for c in chain) or any(b < a for a, b in itertools.pairwise(chain)):  # type: ignore[operator]
            continue  # a mark missing or out of order: another task's step was matched
        offered += labels is OFFER_STEPS
        for label, (a, b) in zip(labels, itertools.pairwise(chain), strict=True):
            steps[label].append(b - a)  # type: ignore[operator]
        total.append(chain[-1] - t0)  # type: ignore[operator]
    # Beside the chain: the producer's own wait for its INSERT's answer, which
    # comes back while the notification travels to the node.
    answered = [b - a for a, b in zip(times.get("ins0", []), times.get("ins1", []), strict=False) if b >= a]
    print(f"{len(total)} tasks followed, {offered} of them through an offer")
    for label, values in [
        *steps.items(),
        ("total: send to the worker's receive loop", total),
        ("(beside) INSERT sent to answered, producer", answered),
    ]:
        if not values:
            continue
        v = sorted(values)
        n = len(v)
        print(
            f"{label:<42} n={n:<5} p50 {v[n // 2] * 1e3:5.2f}  p90 {v[int(n * 0.9)] * 1e3:5.2f}  "
            f"p99 {v[int(n * 0.99)] * 1e3:6.2f}  mean {statistics.mean(v) * 1e3:5.2f} ms"
        )


if __name__ == "__main__":
    main()
