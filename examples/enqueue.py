"""Enqueue a task with the SDK and wait for it to finish."""

from __future__ import annotations

import os
import sys
import time

from conveyor.sdk import Client

client = Client(os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"), token=os.environ.get("CONVEYOR_TOKEN"))
to = sys.argv[1] if len(sys.argv) > 1 else "a@b.c"
task = client.enqueue("email:send", {"to": to}, queue="email")
print(f"enqueued {task.id} ({task.state})")
for _ in range(100):
    task = client.get_task(task.id)
    if task.state in ("completed", "archived"):
        break
    time.sleep(0.1)
print(f"{task.id} is {task.state}; result={task.result!r} last_error={task.last_error!r}")
