"""Module-level task functions for the django.tasks backend tests."""

from __future__ import annotations

from django.tasks import task


@task
def add(a: int, b: int) -> int:
    return a + b


@task(priority=100, queue_name="urgent")
def shout(text: str) -> str:
    return text.upper()


@task(takes_context=True)
def which_attempt(context, label: str) -> dict:  # type: ignore[no-untyped-def]
    return {"label": label, "attempt": context.attempt}


@task
def explode() -> None:
    raise RuntimeError("boom")
