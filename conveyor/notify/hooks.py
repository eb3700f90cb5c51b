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
    # Whether a wake is a round trip to other processes (a PUBLISH to
    # Redis). Only then does an enqueue wake before its flush: the wake's
    # round trip overlaps the flush, and a node can start the task sooner.
    # Otherwise (nobody to wake, or a node's own wake, which only schedules
    # its dispatchers) the second statement that waits for the flush would
    # cost a round trip of its own, so the one durable INSERT is cheaper.
    wake_is_a_round_trip = False

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        """Tell the queues' dispatchers there is due work (at *at*, or now).

        May be called while the enqueuing connection waits for its flush
        (docs/architecture.md, "Enqueue: wake, then flush"): a hook must not
        use the broker's database connection.
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
