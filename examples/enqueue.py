"""Enqueue an email task with the SDK and wait for a worker (examples/worker.py) to finish it.

    .venv/bin/python examples/enqueue.py [recipient]

Exits 0 when the task completed, 1 otherwise. CONVEYOR_URL and CONVEYOR_TOKEN as for the worker.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

from conveyor.sdk import Client

client = Client(os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"), token=os.environ.get("CONVEYOR_TOKEN"))
to = sys.argv[1] if len(sys.argv) > 1 else "a@b.c"
# Keep the finished row for an hour so we can read its result (the default
# retention of completed tasks is 0: purged at the next sweep).
task = client.enqueue("email:send", {"to": to}, queue="email", retention=timedelta(hours=1))
print(f"enqueued {task.id} ({task.state})")
for _ in range(100):
    task = client.get_task(task.id)
    if task.state in ("completed", "archived", "canceled"):
        break
    time.sleep(0.1)
print(f"{task.id} is {task.state}; result={task.result!r} last_error={task.last_error!r}")
sys.exit(0 if task.state == "completed" else 1)
