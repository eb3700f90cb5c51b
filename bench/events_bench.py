"""What live events cost the drain: the same drain with events off and on.

    .venv/bin/python bench/events_bench.py [--backends dev,cluster] [--tasks 20000] [--rounds 2]

For each backend, a node is started with CONVEYOR_EVENTS=0, then with
CONVEYOR_EVENTS=1 and nobody listening (the publishing cost alone), then
with CONVEYOR_EVENTS=1 plus one /ws/events subscriber on that node receiving
every event (the worst case: nothing filtered away, and the node also does
the subscriber's share of the work). Each round queues N no-op tasks
in a paused queue, connects workers with total concurrency 50, resumes,
and times until the queue is empty. Rounds alternate the modes so drift on
a shared machine hits all alike. Prints drain tasks/s per mode, the cost in
percent against "off", and the events the subscriber received.
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
        node.http.post(
            "/api/v1/tasks/batch", json={"tasks": [{"type": "noop", "queue": queue, "json": {}} for _ in range(1000)]}
        )
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


def run_mode(backend: str, events: bool, tasks: int, round_no: int, subscribe: bool = True) -> tuple[float, int]:
    os.environ["CONVEYOR_EVENTS"] = "1" if events else "0"
    node = Node(backend)
    subscriber = None
    try:
        if events and subscribe:
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
    header = ["events off", "on, no subscriber", "cost", "on, 1 subscriber", "cost", "events received"]
    print(f"{'backend':10}" + "".join(f"{h:>19}" for h in header))
    for backend in args.backends.split(","):
        off: list[float] = []
        quiet: list[float] = []
        on: list[float] = []
        received = 0
        for round_no in range(args.rounds):
            off.append(run_mode(backend, False, args.tasks, round_no)[0])
            quiet.append(run_mode(backend, True, args.tasks, round_no, subscribe=False)[0])
            rate, count = run_mode(backend, True, args.tasks, round_no)
            on.append(rate)
            received = max(received, count)
        mean_off, mean_quiet, mean_on = (sum(v) / len(v) for v in (off, quiet, on))
        cells = [
            f"{mean_off:,.0f}/s",
            f"{mean_quiet:,.0f}/s",
            f"{(mean_off - mean_quiet) / mean_off * 100:.1f}%",
            f"{mean_on:,.0f}/s",
            f"{(mean_off - mean_on) / mean_off * 100:.1f}%",
            f"{received:,}",
        ]
        print(f"{backend:10}" + "".join(f"{c:>19}" for c in cells))


if __name__ == "__main__":
    main()
