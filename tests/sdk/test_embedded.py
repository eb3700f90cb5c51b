"""conveyor.embedded: a real node on a loopback port, driven by the SDK."""

from __future__ import annotations

import threading
import time

import pytest

from conveyor import embedded
from conveyor.sdk import SkipRetry, Task

pytestmark = pytest.mark.slow


def test_embedded_node_runs_tasks_end_to_end() -> None:
    with embedded.start() as node:
        assert node.url.startswith("http://127.0.0.1:")
        worker = node.worker(concurrency=2)
        seen: list[tuple[str, object]] = []

        @worker.task("greet")
        def greet(task: Task) -> str:
            seen.append((task.id, task.payload))
            return f"hello {task.payload['name']}"

        @worker.task("refuse")
        def refuse(task: Task) -> None:
            raise SkipRetry("not today")

        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        client = node.client()
        greeting = client.enqueue("greet", {"name": "ada"})
        refused = client.enqueue("refuse", {})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = (client.get_task(greeting.id).state, client.get_task(refused.id).state)
            if states == ("completed", "archived"):
                break
            time.sleep(0.05)
        assert client.get_task(greeting.id).result == "hello ada"
        assert client.get_task(refused.id).last_error == "SkipRetry: not today"
        assert seen == [(greeting.id, {"name": "ada"})]
        worker.stop()
        runner.join(10)
        assert not runner.is_alive()
    assert node.process.returncode == 0
