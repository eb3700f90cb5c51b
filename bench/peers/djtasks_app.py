"""The django-tasks-db side of the comparison: a no-op task of Django's tasks framework."""

from __future__ import annotations

from django.tasks import task

from bench.peers.driver import count_done, counter_client

PREFIX = "djtasksbench"
_counter = None


@task()
def noop(sent: float | None = None) -> None:
    global _counter
    if _counter is None:
        _counter = counter_client()
    count_done(_counter, PREFIX, sent)
