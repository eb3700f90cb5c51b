"""A producer process for end-to-end tests: enqueues from Django code, one task at a time.

    DATABASE_URL=... REDIS_URL=... python tests/e2e/producer_app.py QUEUE COUNT INTERVAL PAYLOAD_JSON [--wait]

Each task is ``broker.enqueue`` of type "e2e" with the given JSON payload,
``INTERVAL`` seconds apart (0: back to back). Prints one line per task:
its id and the state the enqueue returned. ``--wait``: set up, print
"ready", and start only when a line arrives on standard input.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conveyor_site.settings")
    django.setup()
    from conveyor.broker import TaskSpec, get_broker

    queue, count, interval, payload = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].encode()
    broker = get_broker()
    if "--wait" in sys.argv[5:]:
        broker.tasks.filter(id="warm-up").exists()  # connected before the signal
        print("ready", flush=True)
        sys.stdin.readline()
    for _ in range(count):
        task = broker.enqueue(TaskSpec(type="e2e", queue=queue, payload=payload))
        print(task.id, task.state, flush=True)
        if interval:
            time.sleep(interval)


if __name__ == "__main__":
    main()
