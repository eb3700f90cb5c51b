"""The broker: the only code that changes task state.

``Broker`` gathers the operations of ``SEMANTICS.md`` (enqueue, lease,
outcomes, sweeps, dependencies, admin, queues, groups, cron, webhook
registrations). It takes an injected clock and a database alias; time never
comes from the OS or the database directly.

Each concern is an object of its own (``Concerns``), built with the shared
``Context`` (conveyor/broker/base.py) and, as constructor arguments, the
other concerns it uses; none reaches another through ``self``.
``Broker`` builds them and offers their operations under the names callers
use. Who uses whom: docs/architecture.md, "The broker".
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.db import connections

from conveyor import __version__
from conveyor.broker.admin import Admin
from conveyor.broker.base import Context
from conveyor.broker.bulk import Bulk
from conveyor.broker.crashes import Crashes
from conveyor.broker.cron import Cron
from conveyor.broker.dependencies import Dependencies
from conveyor.broker.enqueue import Enqueuer
from conveyor.broker.groups import Groups
from conveyor.broker.keys import Keys
from conveyor.broker.lease import Leases
from conveyor.broker.nodes import Nodes
from conveyor.broker.outcomes import Outcomes
from conveyor.broker.queues import Queues
from conveyor.broker.registrations import Registrations
from conveyor.broker.sweeps import Sweeps
from conveyor.broker.types import (
    Dependency,
    IdResult,
    ItemResult,
    LeaseBatch,
    RetrySpec,
    SweepReport,
    TaskSpec,
)
from conveyor.clock import Clock
from conveyor.notify.hooks import BrokerHooks
from conveyor.store import Store

__all__ = [
    "Broker",
    "Concerns",
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


@dataclass(frozen=True, slots=True)
class Concerns:
    """The broker's concerns, each built with the context and the concerns it uses."""

    enqueuer: Enqueuer
    leases: Leases  # uses groups
    outcomes: Outcomes
    crashes: Crashes  # uses outcomes
    nodes: Nodes  # uses outcomes
    sweeps: Sweeps
    dependencies: Dependencies
    admin: Admin
    bulk: Bulk  # uses admin
    queues: Queues
    groups: Groups
    cron: Cron  # uses enqueuer
    registrations: Registrations
    keys: Keys

    @classmethod
    def build(cls, ctx: Context) -> Concerns:
        enqueuer, outcomes, groups, admin = Enqueuer(ctx), Outcomes(ctx), Groups(ctx), Admin(ctx)
        crashes = Crashes(ctx, outcomes)
        return cls(
            enqueuer=enqueuer,
            leases=Leases(ctx, groups),
            outcomes=outcomes,
            crashes=crashes,
            nodes=Nodes(ctx, outcomes),
            sweeps=Sweeps(ctx),
            dependencies=Dependencies(ctx),
            admin=admin,
            bulk=Bulk(ctx, admin),
            queues=Queues(ctx),
            groups=groups,
            cron=Cron(ctx, enqueuer),
            registrations=Registrations(ctx),
            keys=Keys(ctx),
        )


class Broker:
    """The one entry point: ``Broker(clock=, using=, hooks=)``, or the process's ``get_broker()``.

    Its operations are the concerns' own bound methods, set once per
    broker below: a call costs what a method call costs, with no
    forwarding frame between the caller and the concern (the hot paths,
    enqueue, lease and ack, are measured in bench/instructions.py).
    """

    def __init__(self, *, clock: Clock | None = None, using: str = "default", hooks: BrokerHooks | None = None):
        self.ctx = ctx = Context(self, clock=clock, using=using, hooks=hooks)
        self.concerns = c = Concerns.build(ctx)

        # The context's helpers.
        self.now = ctx.now
        self.atomic = ctx.atomic
        self.after_commit = ctx.after_commit
        self.wake_after_commit = ctx.wake_after_commit
        self.resolve_after_commit = ctx.resolve_after_commit
        self.emit = ctx.emit

        # enqueue (broker/enqueue.py)
        self.enqueue = c.enqueuer.enqueue
        self.enqueue_one = c.enqueuer.enqueue_one
        self.enqueue_batch = c.enqueuer.enqueue_batch
        self.enqueue_tx = c.enqueuer.enqueue_tx
        self.as_model = c.enqueuer.as_model
        self.one_insert_task = c.enqueuer.one_insert_task
        self.insert_on = c.enqueuer.insert_on
        self.announce_inserted = c.enqueuer.announce_inserted
        # lease (broker/lease.py)
        self.lease = c.leases.lease
        self.lease_on = c.leases.lease_on
        self.lease_group = c.leases.lease_group
        # outcomes of a lease (broker/outcomes.py)
        self.ack = c.outcomes.ack
        self.ack_many = c.outcomes.ack_many
        self.ack_on = c.outcomes.ack_on
        self.fail = c.outcomes.fail
        self.archive_leased = c.outcomes.archive_leased
        self.settle_failure = c.outcomes.settle_failure
        self.release = c.outcomes.release
        self.release_many = c.outcomes.release_many
        self.extend = c.outcomes.extend
        self.extend_many = c.outcomes.extend_many
        self.set_progress = c.outcomes.set_progress
        # crashed workers, dead nodes (broker/crashes.py, broker/nodes.py)
        self.settle_crash = c.crashes.settle_crash
        self.defer_suspects = c.crashes.defer_suspects
        self.dead_nodes = c.nodes.dead_nodes
        self.rescue_node = c.nodes.rescue_node
        self.hand_over = c.nodes.hand_over
        # sweeps (broker/sweeps.py)
        self.reap_expired_leases = c.sweeps.reap_expired_leases
        self.promote_scheduled = c.sweeps.promote_scheduled
        self.archive_expired = c.sweeps.archive_expired
        self.purge = c.sweeps.purge
        self.pending_counts = c.sweeps.pending_counts
        # dependencies (broker/dependencies.py)
        self.resolve_dependents = c.dependencies.resolve_dependents
        self.promote_ready_dependents = c.dependencies.promote_ready_dependents
        # operator actions and reads (broker/admin.py)
        self.get_task = c.admin.get_task
        self.task_attempts = c.admin.task_attempts
        self.cancel_task = c.admin.cancel_task
        self.archive_task = c.admin.archive_task
        self.delete_task = c.admin.delete_task
        self.run_task = c.admin.run_task
        self.reschedule_task = c.admin.reschedule_task
        self.cancel_tasks = c.admin.cancel_tasks
        self.archive_tasks = c.admin.archive_tasks
        self.run_tasks = c.admin.run_tasks
        self.delete_tasks = c.admin.delete_tasks
        self.reschedule_tasks = c.admin.reschedule_tasks
        self.list_tasks = c.admin.list_tasks
        self.filtered = c.admin.filtered
        # bulk jobs (broker/bulk.py)
        self.count_matching = c.bulk.count_matching
        self.start_bulk = c.bulk.start_bulk
        self.bulk_job = c.bulk.bulk_job
        self.bulk_jobs = c.bulk.bulk_jobs
        self.running_bulk_ids = c.bulk.running_bulk_ids
        self.run_bulk_batch = c.bulk.run_bulk_batch
        # queue settings and stats (broker/queues.py)
        self.set_queue_paused = c.queues.set_queue_paused
        self.queue_paused = c.queues.queue_paused
        self.set_queue_policy = c.queues.set_queue_policy
        self.queue_policy = c.queues.queue_policy
        self.set_rate_limit = c.queues.set_rate_limit
        self.delete_rate_limit = c.queues.delete_rate_limit
        self.rate_limit = c.queues.rate_limit
        self.rate_limits = c.queues.rate_limits
        self.set_concurrency_limit = c.queues.set_concurrency_limit
        self.delete_concurrency_limit = c.queues.delete_concurrency_limit
        self.concurrency_limit = c.queues.concurrency_limit
        self.concurrency_limits = c.queues.concurrency_limits
        self.key_usage = c.queues.key_usage
        self.queue_stats = c.queues.queue_stats
        # aggregation groups (broker/groups.py)
        self.set_group_config = c.groups.set_group_config
        self.delete_group_config = c.groups.delete_group_config
        self.group_configs = c.groups.group_configs
        self.group_config = c.groups.group_config
        self.group_stats = c.groups.group_stats
        self.due_groups = c.groups.due_groups
        # cron entries (broker/cron.py)
        self.upsert_cron_entry = c.cron.upsert_cron_entry
        self.get_cron_entry = c.cron.get_cron_entry
        self.list_cron_entries = c.cron.list_cron_entries
        self.list_due_cron_entries = c.cron.list_due_cron_entries
        self.set_cron_paused = c.cron.set_cron_paused
        self.update_cron_next_run = c.cron.update_cron_next_run
        self.delete_cron_entry = c.cron.delete_cron_entry
        self.fire_cron_entry = c.cron.fire_cron_entry
        # webhook registrations (broker/registrations.py)
        self.upsert_webhook = c.registrations.upsert_webhook
        self.get_webhook = c.registrations.get_webhook
        self.list_webhooks = c.registrations.list_webhooks
        self.set_webhook_paused = c.registrations.set_webhook_paused
        self.delete_webhook = c.registrations.delete_webhook
        # keys of encryption at rest (broker/keys.py)
        self.key_status = c.keys.key_status
        self.reseal_step = c.keys.reseal_step
        self.reseal_cron = c.keys.reseal_cron

    # -- the context, as callers read it --------------------------------------

    @property
    def clock(self) -> Clock:
        return self.ctx.clock

    @property
    def db(self) -> str:
        return self.ctx.db

    @property
    def hooks(self) -> BrokerHooks:
        return self.ctx.hooks

    @hooks.setter
    def hooks(self, hooks: BrokerHooks) -> None:
        self.ctx.hooks = hooks

    @property
    def store(self) -> Store:
        """The database's store (conveyor/store): every hot-path statement goes through it."""
        return self.ctx.store

    @property
    def tasks(self) -> Any:
        return self.ctx.tasks

    @property
    def edges(self) -> Any:
        return self.ctx.edges

    # -- tables of a concern's own (read by callers before the split) ---------

    @property
    def queues(self) -> Any:
        return self.concerns.queues.queues

    @property
    def group_configs_table(self) -> Any:
        return self.concerns.groups.group_configs_table

    @property
    def cron(self) -> Any:
        return self.concerns.cron.cron

    @property
    def webhooks(self) -> Any:
        return self.concerns.registrations.webhooks

    @property
    def bulk(self) -> Any:
        return self.concerns.bulk.bulk

    @property
    def offer_misses(self) -> Any:
        return self.concerns.enqueuer.offer_misses

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
