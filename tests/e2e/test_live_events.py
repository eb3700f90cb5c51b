"""Live events from a real node, in both modes: a task's whole life reaches
/ws/events and SSE subscribers of that node.

In cluster mode the events travel through Redis (channels_redis) to the
subscriber's consumer in the same process: a regression test for channel
names that made the layer's shared receive loop starve consumers.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
from websockets.sync.client import connect as ws_connect

from tests.e2e.support import wait_for


def test_a_tasks_lifecycle_reaches_the_events_websocket(cluster):
    node = cluster.node()
    url = node.url.replace("http://", "ws://") + "/ws/events?queue=live-ev"
    received: list[dict] = []
    with ws_connect(url, open_timeout=10) as ws:
        time.sleep(0.3)  # let the consumer join the events group
        task = node.enqueue(queue="live-ev", json={})
        node.enqueue(queue="elsewhere", json={})  # filtered away
        worker = cluster.worker(node, queues="live-ev=1")
        worker.wait_connected(node)
        deadline = time.time() + 20
        while "completed" not in [e["kind"] for e in received] and time.time() < deadline:
            try:
                received += json.loads(ws.recv(timeout=1))["events"]
            except TimeoutError:
                continue
    kinds = [(e["kind"], e["state"]) for e in received if e["task_id"] == task["id"]]
    assert kinds == [("enqueued", "pending"), ("leased", "active"), ("completed", "completed")]
    assert {e["queue"] for e in received} == {"live-ev"}


def test_events_reach_a_server_sent_events_stream(cluster):
    node = cluster.node()
    lines: list[str] = []
    connected = threading.Event()

    def read() -> None:
        with httpx.stream("GET", node.url + "/api/v1/events?queue=live-sse", timeout=30) as response:
            for line in response.iter_lines():
                connected.set()
                lines.append(line)
                if any(entry.startswith("data:") for entry in lines):
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert connected.wait(10)
    time.sleep(0.3)
    task = node.enqueue(queue="live-sse", json={})
    wait_for(lambda: any(line.startswith("data:") for line in lines), 15, what="an SSE event")
    event = json.loads(next(line for line in lines if line.startswith("data:")).removeprefix("data: "))
    assert (event["kind"], event["task_id"]) == ("enqueued", task["id"])
