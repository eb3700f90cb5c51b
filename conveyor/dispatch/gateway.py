"""Gateways: the node-side owner of one worker's leases and credits.

A gateway is what a dispatcher hands tasks to. The WebSocket consumer (one
per worker session) and the webhook gateway (one per registration) both
build on ``Gateway``: it splits the worker's concurrency across its queues,
tracks what is in flight, turns outcomes into broker calls, and gives
credit back.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor import metrics
from conveyor.conf import conveyor_settings
from conveyor.dispatch.breaker import TypeBreaker
from conveyor.sdk import protocol as p

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node
    from conveyor.models import Task

logger = logging.getLogger("conveyor.dispatch")

WORKER_LOST = "worker connection lost"


def split_capacity(concurrency: int, weights: dict[str, int]) -> dict[str, int]:
    """Split *concurrency* across queues in proportion to weight, each at least 1.

    Largest remainder: shares sum to *concurrency* unless there are more
    queues than slots, in which case every queue still gets one.
    """
    total = sum(weights.values())
    exact = {q: concurrency * w / total for q, w in weights.items()}
    shares = {q: max(1, int(v)) for q, v in exact.items()}
    spare = concurrency - sum(shares.values())
    for q in sorted(exact, key=lambda q: exact[q] - int(exact[q]), reverse=True):
        if spare <= 0:
            break
        shares[q] += 1
        spare -= 1
    return shares


@dataclass
class Inflight:
    task: Task
    queue: str
    group_lease: str | None = None  # set for members of a batch delivery
    since: float = field(default_factory=time.monotonic)


@dataclass
class GroupInflight:
    lease_id: str
    queue: str
    members: dict[str, Task]


class Gateway:
    """Base gateway; subclasses implement ``push_tasks``, ``push_group``, ``push_cancel``."""

    def __init__(self, node: Node, key: str, queues: dict[str, int], concurrency: int, batch_types: list[str]):
        self.node = node
        self.key = key
        self.queues = dict(queues)
        self.concurrency = concurrency
        self.batch_types = set(batch_types)
        self.inflight: dict[str, Inflight] = {}
        self.groups: dict[str, GroupInflight] = {}
        self.breaker = TypeBreaker(conveyor_settings.TYPE_BREAKER_PROBE_DELAY)
        self.attached = False
        self.connected_at = datetime.now()

    # -- registration ------------------------------------------------------------

    def attach(self, shares: dict[str, int] | None = None) -> None:
        """Offer capacity to the queues' dispatchers: the weighted split of the
        concurrency (or *shares*), less what is already in flight per queue."""
        busy: dict[str, int] = {}
        # A single delivery holds one slot; a whole batch delivery holds one.
        for queue in [r.queue for r in self.inflight.values() if r.group_lease is None] + [
            g.queue for g in self.groups.values()
        ]:
            busy[queue] = busy.get(queue, 0) + 1
        for queue, credit in (shares or split_capacity(self.concurrency, self.queues)).items():
            self.node.dispatcher(queue).add_gateway(self, max(0, credit - busy.get(queue, 0)), self.queues[queue])
        self.attached = True

    def detach(self) -> None:
        if not self.attached:
            return
        self.attached = False
        for queue in self.queues:
            dispatcher = self.node.dispatchers.get(queue)
            if dispatcher is not None:
                dispatcher.remove_gateway(self)

    # -- delivery --------------------------------------------------------------------

    def deliver(self, queue: str, tasks: list[Task]) -> None:
        """Take ownership of leased tasks and push them to the worker."""
        for task in tasks:
            self.inflight[task.id] = Inflight(task, queue)
            self.node.leases[task.id] = self
        self.push_tasks(queue, tasks)

    def deliver_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        """Push a fired group as one batch; it costs one credit."""
        lease_id = tasks[0].lease_id or ""
        self.groups[lease_id] = GroupInflight(lease_id, queue, {t.id: t for t in tasks})
        for task in tasks:
            self.inflight[task.id] = Inflight(task, queue, group_lease=lease_id)
            self.node.leases[task.id] = self
        self.push_group(queue, group, tasks)

    def push_tasks(self, queue: str, tasks: list[Task]) -> None:
        raise NotImplementedError

    def push_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        raise NotImplementedError

    def push_cancel(self, task_id: str, lease_id: str, reason: str) -> None:
        raise NotImplementedError

    # -- outcomes --------------------------------------------------------------------

    def settle(self, task_id: str, outcome: str, error: str = "", result: Any = None) -> bool:
        """Apply a worker's outcome for one task; False if it is not ours (anymore)."""
        record = self.inflight.pop(task_id, None)
        if record is None:
            return False
        self.node.leases.pop(task_id, None)
        task, node = record.task, self.node
        if outcome == p.SUCCESS:
            node.acks.submit(task, encode_result(result))
        elif outcome == p.RELEASED:
            node.spawn(node.db.run(node.broker.release_many, [(task.id, task.lease_id or "")]))
        else:
            node.spawn(
                node.db.run(
                    node.broker.settle_failure,
                    task.id,
                    task.lease_id or "",
                    error or "task failed",
                    skip_retry=outcome == p.SKIP_RETRY,
                )
            )
        now = time.monotonic()
        self.breaker.record(task.type, outcome in (p.SUCCESS, p.RELEASED), now)
        metrics.PROCESS_DURATION.labels(record.queue, task.type).observe(now - record.since)
        if record.group_lease is None:
            self._refund(record.queue, task.type)
        else:
            self.member_done(record)
        return True

    def member_done(self, record: Inflight) -> None:
        """A member of a batch delivery resolved (webhooks refund when all have)."""

    def settle_group(self, lease_id: str, results: dict[str, tuple[str, str, Any]]) -> bool:
        """Apply a batch result: listed members by outcome, the rest released."""
        group = self.groups.pop(lease_id, None)
        if group is None:
            return False
        for task_id in group.members:
            outcome, error, result = results.get(task_id, (p.RELEASED, "", None))
            self.settle(task_id, outcome, error, result)
        any_type = next(iter(group.members.values())).type
        self._refund(group.queue, any_type)
        return True

    def _refund(self, queue: str, task_type: str) -> None:
        if not self.attached:
            return
        dispatcher = self.node.dispatchers.get(queue)
        if dispatcher is None:
            return
        delay = self.breaker.refund_delay(task_type, time.monotonic())
        if delay > 0:
            self.node.loop.call_later(delay, dispatcher.refund, self, 1)
        else:
            dispatcher.refund(self, 1)

    def add_credit(self, n: int, queue: str | None = None) -> None:
        """Extra slots the worker opened without finishing a task."""
        shares = {queue: n} if queue else split_capacity(n, self.queues)
        for q, share in shares.items():
            dispatcher = self.node.dispatchers.get(q)
            if dispatcher is not None and q in self.queues:
                dispatcher.refund(self, share)

    # -- lease upkeep ------------------------------------------------------------------

    async def heartbeat(self, task_ids: list[str]) -> None:
        """Extend the leases of *task_ids*; cancel on the worker those that were lost."""
        refs = [(tid, self.inflight[tid].task.lease_id or "") for tid in task_ids if tid in self.inflight]
        if not refs:
            return
        _expires, lost = await self.node.db.run(self.node.broker.extend_many, refs)
        for task_id in lost:
            self.lose(task_id, "lease lost")

    def lose(self, task_id: str, reason: str) -> None:
        """The lease is gone: tell the worker to stop and give the credit back."""
        record = self.inflight.pop(task_id, None)
        if record is None:
            return
        self.node.leases.pop(task_id, None)
        self.push_cancel(task_id, record.task.lease_id or "", reason)
        if record.group_lease is None:
            self._refund(record.queue, record.task.type)
        else:
            self.member_done(record)

    def cancel(self, task_id: str, lease_id: str) -> None:
        """An operator canceled a running task: ask the worker to abort it."""
        record = self.inflight.get(task_id)
        if record is not None and (not lease_id or record.task.lease_id == lease_id):
            self.push_cancel(task_id, record.task.lease_id or "", "canceled")

    # -- endings -----------------------------------------------------------------------

    async def release_all(self) -> None:
        """Graceful end: every task still in flight goes back, no retry spent."""
        refs = self._take_all()
        if refs:
            await self.node.db.run(self.node.broker.release_many, refs)

    async def fail_all(self, error: str = WORKER_LOST) -> None:
        """Abrupt end: in-flight tasks are due again at once, but the attempt counts."""
        for task_id, lease_id in self._take_all():
            try:
                await self.node.db.run(self.node.broker.settle_failure, task_id, lease_id, error, delay=0.0)
            except Exception as exc:  # lease already lost: nothing to do
                logger.debug("could not fail %s after disconnect: %s", task_id, exc)

    def _take_all(self) -> list[tuple[str, str]]:
        refs = [(tid, rec.task.lease_id or "") for tid, rec in self.inflight.items()]
        for tid in self.inflight:
            self.node.leases.pop(tid, None)
        self.inflight.clear()
        self.groups.clear()
        return refs


def encode_result(result: Any) -> bytes | None:
    if result is None:
        return None
    return json.dumps(result, separators=(",", ":")).encode()
