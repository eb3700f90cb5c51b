"""One producer enqueuing one task at a time with a client library (bench/http_enqueue.py --producer).

    python bench/sdk_producer.py CHECKOUT KIND URL COUNT WARMUP

KIND is ``sdk`` (that checkout's ``conveyor.sdk.Client``), ``async`` (its
``AsyncClient``, awaited one call at a time) or ``httpx`` (``httpx.Client``,
the baseline). Every kind builds the request and reads the answer with the
SDK's own helpers, so they differ in the HTTP library alone. Prints one
JSON line: tasks/s and the process's CPU time per call (all its threads).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from functools import partial


def enqueuer(kind: str, url: str) -> Callable[[], object]:
    """A function that enqueues one no-op task on the node at *url* with client *kind*."""
    from conveyor.sdk.client import AsyncClient, Client, TaskInfo, task_request

    if kind == "sdk":
        return partial(Client(url, timeout=60).enqueue, "noop", {}, queue="single")
    if kind == "async":
        import asyncio

        loop = asyncio.new_event_loop()
        aclient = AsyncClient(url, timeout=60)
        return lambda: loop.run_until_complete(aclient.enqueue("noop", {}, queue="single"))
    import httpx

    http = httpx.Client(base_url=url, timeout=60)

    def enqueue() -> None:
        response = http.post("/api/v1/tasks", json=task_request("noop", {}, queue="single"))
        if response.status_code != 201:
            raise SystemExit(f"enqueue answered {response.status_code}")
        TaskInfo.from_json(response.json())

    return enqueue


def main() -> None:
    checkout, kind, url, count, warmup = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    sys.path.insert(0, checkout)  # that build's SDK, not this one's
    enqueue = enqueuer(kind, url)
    for _ in range(warmup):
        enqueue()
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(count):
        enqueue()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"rate": count / elapsed, "cpu_us": cpu / count * 1e6}))


if __name__ == "__main__":
    main()
