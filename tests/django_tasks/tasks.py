"""Module-level task functions for the django.tasks tests (both backends run these)."""

from __future__ import annotations

import os
import time

from django.tasks import task

from conveyor.django_tasks import report_progress
from tests.django_tasks import signal_log  # noqa: F401 (its receivers record every task signal)


class Boom(Exception):
    """An exception of the project's own, so its class path is not builtins'."""


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="sealed")
def echo(value: object) -> object:
    return value


@task
async def add_later(a: int, b: int) -> int:
    return a + b


@task(priority=100, queue_name="urgent")
def shout(text: str) -> str:
    return text.upper()


@task(queue_name="ordered")
def label(text: str) -> str:
    return text


@task(takes_context=True)
def which_attempt(context, label: str) -> dict:  # type: ignore[no-untyped-def]
    return {"label": label, "attempt": context.attempt}


@task(takes_context=True)
def halfway_then_wait(context, gate: str) -> bool:  # type: ignore[no-untyped-def]
    """Report 50% and wait until *gate* exists (so a test can see the progress of a running task)."""
    reported = report_progress(context, 50, "halfway")
    deadline = time.monotonic() + 30
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{gate} never appeared")
        time.sleep(0.02)
    return reported


@task
def explode() -> None:
    raise Boom("bad input")


@task
def nested() -> dict:
    return {"pair": (1, 2), "raw": b"bytes", "items": [("a", 1)]}


@task
def opaque() -> object:
    return object()
