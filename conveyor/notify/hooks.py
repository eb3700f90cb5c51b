"""What the broker tells the rest of the system after a commit.

The broker changes state; these hooks carry the consequences outward: wake
the dispatchers of queues that gained due work, publish lifecycle events,
resolve dependents of tasks that finished, and ask the gateway holding a
running task to cancel it. All are best effort: a missed wake or resolution
is caught by the sweepers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.broker import Broker
    from conveyor.events import Event


class BrokerHooks:
    """Hooks that do nothing; the base for real ones."""

    wants_events = False
    # Whether these hooks reach other processes (a channel layer shared
    # through Redis). Only then does an enqueue from this process look for a
    # node's offer (conveyor.broker.offers): with nobody to reach, there is
    # no node to have offered, and the look would cost the INSERT for nothing.
    reaches_other_processes = False

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        """Tell the queues' dispatchers there is due work (at *at*, or now).

        Called after the change has committed durably.
        """

    def publish(self, events: Sequence[Event]) -> None:
        """Publish lifecycle events."""

    def resolve(self, broker: Broker, task_ids: Sequence[str]) -> None:
        """Resolve the dependents of *task_ids*, which just reached a terminal state."""

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        """Ask whoever holds these (task id, lease id) leases to stop."""


class InlineHooks(BrokerHooks):
    """Resolve dependents synchronously, right after the commit.

    Used where no node runs (CLI, Django code, tests): the work is small and
    the caller is not on a hot path.
    """

    def resolve(self, broker: Broker, task_ids: Sequence[str]) -> None:
        broker.resolve_dependents(task_ids)


class RecordingHooks(InlineHooks):
    """Hooks that remember what they were told; for tests and the CLI."""

    wants_events = True

    def __init__(self) -> None:
        self.wakes: list[tuple[str, datetime | None]] = []
        self.events: list[Event] = []
        self.cancels: list[tuple[str, str]] = []

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        self.wakes.extend((q, at) for q in queues)

    def publish(self, events: Sequence[Event]) -> None:
        self.events.extend(events)

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        self.cancels.extend(refs)

    def woken(self) -> set[str]:
        return {q for q, _ in self.wakes}
