"""What every concern of the broker shares: clock, database alias, hooks, store, after-commit helpers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.db import transaction

from conveyor.clock import Clock, system_clock
from conveyor.events import Event, event_for
from conveyor.models import Task, TaskDependency
from conveyor.notify.hooks import BrokerHooks, InlineHooks
from conveyor.store import Store, store_for

if TYPE_CHECKING:
    from conveyor.broker import Broker

logger = logging.getLogger("conveyor.broker")

# Schedules a hook: after the caller's commit (``after_commit``, the
# default) or at once when the statement has committed already (``run_now``).
Then = Callable[[Callable[[], None]], None]


class Context:
    """The one object every concern of the broker is built with (conveyor/broker/__init__.py).

    It holds no rules: the time, the database, the store over it, the hooks,
    and the helpers that hand a change's consequences to the hooks after
    commit. *broker* is what ``hooks.resolve`` is given (``InlineHooks``
    resolves dependents through it).
    """

    def __init__(
        self,
        broker: Broker,
        *,
        clock: Clock | None = None,
        using: str = "default",
        hooks: BrokerHooks | None = None,
    ) -> None:
        self.broker = broker
        self.clock = clock or system_clock
        self.db = using
        self.hooks = hooks or InlineHooks()

    def now(self) -> datetime:
        return self.clock.now()

    @property
    def tasks(self) -> Any:
        return Task.objects.db_manager(self.db)

    @property
    def edges(self) -> Any:
        return TaskDependency.objects.db_manager(self.db)

    def atomic(self) -> Any:
        return transaction.atomic(using=self.db)

    @cached_property
    def store(self) -> Store:
        """The database's store (conveyor/store): every hot-path statement goes through it."""
        return store_for(self.db)

    def after_commit(self, fn: Callable[[], None]) -> None:
        # robust: a failing hook is logged, never undoes or fails the caller.
        transaction.on_commit(fn, using=self.db, robust=True)

    def wake_after_commit(self, queues: Iterable[str], at: datetime | None = None, *, then: Then | None = None) -> None:
        """Wake the queues' dispatchers after commit (*then*: as for ``emit``)."""
        queues = set(queues)
        if queues:
            (then or self.after_commit)(lambda: self.hooks.wake(queues, at))

    def resolve_after_commit(self, task_ids: Sequence[str], *, then: Then | None = None) -> None:
        """Resolve the dependents of finished tasks after commit (*then*: as for ``emit``)."""
        if task_ids:
            ids = list(task_ids)
            (then or self.after_commit)(lambda: self.hooks.resolve(self.broker, ids))

    def emit(
        self,
        kind: str,
        tasks: Iterable[Any],
        at: datetime,
        *,
        then: Then | None = None,
        **overrides: Any,
    ) -> None:
        """Publish one event per task after commit (only if anyone listens).

        *then* schedules the publishing (default: ``after_commit``); a caller
        whose statement has already committed on a connection of its own
        passes one that runs it at once.
        """
        if not self.hooks.wants_events:
            return
        events = [_with(event_for(kind, t, at), overrides) for t in tasks]
        if events:
            (then or self.after_commit)(lambda: self.hooks.publish(events))


def run_now(fn: Callable[[], None]) -> None:
    """A *then* for ``emit`` and ``_announce`` when the statement has already committed.

    Like the commit hooks of ``after_commit``, a failing one is logged and
    never fails the caller: what it follows is committed.
    """
    try:
        fn()
    except Exception:
        logger.exception("a hook after commit failed")


def _with(event: Event, overrides: dict[str, Any]) -> Event:
    if not overrides:
        return event
    from dataclasses import replace

    return replace(event, **overrides)


def as_bytes(value: Any) -> bytes:
    """BinaryField reads back as memoryview on Postgres, bytes on SQLite."""
    if value is None:
        return b""
    return bytes(value)
