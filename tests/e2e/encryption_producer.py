"""Enqueue from Django code as an application does, for tests/e2e/test_encryption.py.

    DATABASE_URL=... CONVEYOR_ENCRYPTION_KEYS=... python tests/e2e/encryption_producer.py MARKER

Three tasks whose payloads carry MARKER: ``broker.enqueue`` on its own, one
inside the caller's ``transaction.atomic()``, and a ``django.tasks`` task
(``tests.django_tasks.tasks.echo``, queue ``sealed``). Prints their ids as
one JSON object.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_tasks.settings")
    django.setup()
    from django.db import transaction

    from conveyor.broker import TaskSpec, get_broker
    from tests.django_tasks.tasks import echo

    marker = sys.argv[1]
    payload = json.dumps({"echo": marker}).encode()
    broker = get_broker()
    plain = broker.enqueue(TaskSpec(type="e2e", payload=payload))
    with transaction.atomic():
        in_tx = broker.enqueue(TaskSpec(type="e2e", payload=payload))
    result = echo.enqueue(marker)
    print(json.dumps({"django": plain.id, "django_tx": in_tx.id, "django_tasks": result.id}), flush=True)


if __name__ == "__main__":
    main()
