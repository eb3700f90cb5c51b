"""One build's producer for bench/paired.py: enqueues when told, on stdin.

    <tree>/.venv/bin/python bench/paired_agent.py URL      (cwd: the tree)

Runs with the tree's own interpreter, so ``conveyor`` is that build's SDK
and broker. Each line read is a command; each is answered with one line,
the seconds the enqueues took:

    http N QUEUE TAG RATE   N one-task POSTs through the SDK ``Client``
    code N QUEUE TAG RATE   N ``get_broker().enqueue`` calls from Django code

RATE 0 sends as fast as it can; otherwise at RATE tasks/s on a fixed
schedule. Each payload is {"t": send time, "tag": TAG} for
bench/worker_proc.py's latency log. Imports nothing of bench/, which is
the other build's.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import django

    django.setup()
    from conveyor.broker import TaskSpec, get_broker
    from conveyor.sdk import Client

    client = Client(sys.argv[1], timeout=60)
    broker = get_broker()

    def http(queue: str, tag: str) -> None:
        client.enqueue("noop", {"t": time.time(), "tag": tag}, queue=queue)

    def code(queue: str, tag: str) -> None:
        payload = json.dumps({"t": time.time(), "tag": tag}).encode()
        broker.enqueue(TaskSpec(type="noop", payload=payload, queue=queue))

    kinds = {"http": http, "code": code}
    for line in sys.stdin:
        kind, n, queue, tag, rate = line.split()
        send, count, interval = kinds[kind], int(n), 1.0 / float(rate) if float(rate) > 0 else 0.0
        start = next_at = time.perf_counter()
        for _ in range(count):
            send(queue, tag)
            if interval:
                next_at += interval
                pause = next_at - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
        print(f"{time.perf_counter() - start:.6f}", flush=True)


if __name__ == "__main__":
    main()
