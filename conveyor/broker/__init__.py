"""The broker: the only code that changes task state.

``Broker`` gathers the operations of ``SEMANTICS.md`` (enqueue, lease,
outcomes, sweeps, dependencies, admin, queues, groups, cron, webhook
registrations). It takes an injected clock and a database alias; time never
comes from the OS or the database directly.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import connections

from conveyor import __version__
from conveyor.broker.admin import AdminOps
from conveyor.broker.bulk import BulkOps
from conveyor.broker.crashes import CrashOps
from conveyor.broker.cron import CronOps
from conveyor.broker.dependencies import DependencyOps
from conveyor.broker.enqueue import EnqueueOps
from conveyor.broker.groups import GroupOps
from conveyor.broker.keys import KeyOps
from conveyor.broker.lease import LeaseOps
from conveyor.broker.nodes import NodeOps
from conveyor.broker.outcomes import OutcomeOps
from conveyor.broker.queues import QueueOps
from conveyor.broker.registrations import RegistrationOps
from conveyor.broker.sweeps import SweepOps
from conveyor.broker.types import (
    Dependency,
    IdResult,
    ItemResult,
    LeaseBatch,
    RetrySpec,
    SweepReport,
    TaskSpec,
)
from conveyor.notify.hooks import BrokerHooks

__all__ = [
    "Broker",
    "Dependency",
    "IdResult",
    "ItemResult",
    "LeaseBatch",
    "RetrySpec",
    "SweepReport",
    "TaskSpec",
    "get_broker",
    "set_broker",
]


class Broker(
    EnqueueOps,
    LeaseOps,
    NodeOps,
    CrashOps,
    OutcomeOps,
    SweepOps,
    DependencyOps,
    BulkOps,
    AdminOps,
    QueueOps,
    GroupOps,
    CronOps,
    RegistrationOps,
    KeyOps,
):
    def enqueue_one(self, spec: TaskSpec) -> ItemResult:
        """Like ``enqueue``, but also tells whether the task was created (False: the id existed)."""
        return self._store([spec], mode="one")[0]

    def info(self) -> dict[str, Any]:
        conn = connections[self.db]
        return {
            "version": __version__,
            "driver": conn.vendor,
            "database": str(conn.settings_dict.get("NAME", "")),
            "time": self.now(),
        }


_default: Broker | None = None
_lock = threading.Lock()


def get_broker() -> Broker:
    """The process-wide broker (system clock, default database)."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = Broker(hooks=_default_hooks())
    return _default


def set_broker(broker: Broker | None) -> None:
    """Replace the process-wide broker (a node installs its own hooks)."""
    global _default
    _default = broker


def _default_hooks() -> BrokerHooks:
    from conveyor.notify.layer import ChannelLayerHooks

    return ChannelLayerHooks()
