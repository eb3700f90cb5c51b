"""What live events cost the drain: the same drain with events off and on.

    .venv/bin/python bench/events_bench.py [--backends dev,cluster] [--tasks 20000] [--rounds 2]

For each backend, a node is started with CONVEYOR_EVENTS=0 and then with
CONVEYOR_EVENTS=1 plus one /ws/events subscriber receiving every event
(the worst case: nothing filtered away). Each round queues N no-op tasks
in a paused queue, connects workers with total concurrency 50, resumes,
and times until the queue is empty. Rounds alternate off/on so drift on a
shared machine hits both alike. Prints drain tasks/s per mode, the events
the subscriber received, and the cost in percent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.dispatch_bench import Node, start_workers, stop_all, wait_sessions


class Subscriber(threading.Thread):
    """Counts the events of /ws/events on a thread of its own."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url.replace("http://", "ws://") + "/ws/events"
        self.events = 0
        self.ready = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        import websockets

        async with websockets.connect(self.url, max_size=None) as ws:
            self.ready.set()
            while not self.done.is_set():
                try:
                    message = await asyncio.wait_for(ws.recv(), 0.2)
                except TimeoutError:
                    continue
                self.events += len(json.loads(message).get("events", []))


def drain(node: Node, tasks: int, queue: str) -> float:
    node.http.post(f"/api/v1/queues/{queue}/pause")
    for _ in range(tasks // 1000):
        node.http.post("/api/v1/tasks/batch", json={"tasks": [{"type": "noop", "queue": queue, "json": {}} for _ in range(1000)]})
    procs = start_workers(node.url, 2, 25, f"{queue}=1")
    wait_sessions(node, 2)
    start = time.perf_counter()
    node.http.post(f"/api/v1/queues/{queue}/resume")
    while node.unfinished(queue):
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    stop_all(procs)
    while node.http.get("/api/v1/workers").json()["workers"]:
        time.sleep(0.05)
    return tasks // 1000 * 1000 / elapsed


def run_mode(backend: str, events: bool, tasks: int, round_no: int) -> tuple[float, int]:
    os.environ["CONVEYOR_EVENTS"] = "1" if events else "0"
    node = Node(backend)
    subscriber = None
    try:
        if events:
            subscriber = Subscriber(node.url)
            subscriber.start()
            subscriber.ready.wait(10)
        rate = drain(node, tasks, f"ev{round_no}")
        if subscriber is not None:
            time.sleep(1.0)  # the last batches of events
            subscriber.done.set()
            subscriber.join(5)
        return rate, subscriber.events if subscriber else 0
    finally:
        node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="dev,cluster")
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{'backend':10}{'events off (tasks/s)':>24}{'events on (tasks/s)':>24}{'events received':>18}{'cost':>10}")
    for backend in args.backends.split(","):
        off: list[float] = []
        on: list[float] = []
        received = 0
        for round_no in range(args.rounds):
            off.append(run_mode(backend, False, args.tasks, round_no)[0])
            rate, count = run_mode(backend, True, args.tasks, round_no)
            on.append(rate)
            received = max(received, count)
        mean_off, mean_on = sum(off) / len(off), sum(on) / len(on)
        cost = (mean_off - mean_on) / mean_off * 100
        print(f"{backend:10}{mean_off:>24,.0f}{mean_on:>24,.0f}{received:>18,}{cost:>9.1f}%")


if __name__ == "__main__":
    main()
