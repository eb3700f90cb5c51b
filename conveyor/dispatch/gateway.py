"""Gateways: the node-side owner of one worker's leases and credits.

A gateway is what a dispatcher hands tasks to. The WebSocket consumer (one
per worker session) and the webhook gateway (one per registration) both
build on ``Gateway``: it splits the worker's concurrency across its queues,
tracks what is in flight, turns outcomes into broker calls, and gives
credit back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor import metrics
from conveyor.conf import conveyor_settings
from conveyor.dispatch.breaker import TypeBreaker
from conveyor.exceptions import LeaseLost
from conveyor.sdk import protocol as p
from conveyor.sealing import ServerText
from conveyor.store import Runner

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node
    from conveyor.models import Task

logger = logging.getLogger("conveyor.dispatch")


def spread(n: int, weights: dict[str, int]) -> dict[str, int]:
    """Split *n* across queues in proportion to weight (largest remainder; shares may be 0)."""
    total = sum(weights.values())
    exact = {q: n * w / total for q, w in weights.items()}
    shares = {q: int(v) for q, v in exact.items()}
    spare = n - sum(shares.values())
    for q in sorted(exact, key=lambda q: exact[q] - shares[q], reverse=True)[:spare]:
        shares[q] += 1
    return shares


def split_capacity(concurrency: int, weights: dict[str, int]) -> dict[str, int]:
    """Split a worker's concurrency across its queues by weight, each at least 1.

    Shares sum to *concurrency*: a queue whose proportional share rounds to
    zero takes its one slot from the largest share. Only when there are more
    queues than slots does the total exceed the concurrency (every queue
    still gets one slot).
    """
    shares = spread(concurrency, weights)
    for queue in [q for q, n in shares.items() if n == 0]:
        donor = max(shares, key=lambda q: (shares[q], weights[q]))
        if shares[donor] > 1:
            shares[donor] -= 1
        shares[queue] = 1
    return shares


@dataclass
class Inflight:
    task: Task
    queue: str
    group_lease: str | None = None  # set for members of a batch delivery
    since: float = field(default_factory=time.monotonic)
    # False while it waits in the worker's prefetch window (the worker says
    # when it starts it); a session without a window runs all it holds, and
    # one with a window runs a delivery at once when it has a free slot
    # (``Gateway.runs_at_once``).
    started: bool = True


@dataclass
class GroupInflight:
    """A batch delivery: one slot, held until every member has resolved."""

    lease_id: str
    queue: str
    task_type: str
    pending: set[str]


class Gateway:
    """Base gateway; subclasses implement ``push_tasks``, ``push_group``, ``push_cancel``."""

    def __init__(
        self,
        node: Node,
        key: str,
        queues: dict[str, int],
        concurrency: int,
        batch_types: list[str],
        prefetch: int = 0,
        labels: dict[str, Any] | None = None,
    ):
        self.node = node
        self.key = key
        self.queues = dict(queues)
        self.concurrency = concurrency
        self.prefetch = prefetch  # dispatches held beyond the concurrency, not yet started
        self.batch_types = set(batch_types)
        self.inflight: dict[str, Inflight] = {}
        self.groups: dict[str, GroupInflight] = {}
        self.breaker = TypeBreaker(conveyor_settings.TYPE_BREAKER_PROBE_DELAY)
        self.attached = False
        self.connected_at = datetime.now()
        self._resolved: asyncio.Event | None = None  # set by a resolution while a drain waits
        self.labels: dict[str, Any] = dict(labels or {})
        # Who runs what this gateway holds, as its attempts name it (fixed for its life).
        self.runner = Runner(key, self.labels, node.id)
        self._refill: dict[str, tuple[int, int]] = {}  # queue -> (its share of the concurrency, refill batch)

    # -- registration ------------------------------------------------------------

    def attach(self, shares: dict[str, int] | None = None) -> None:
        """Offer capacity to the queues' dispatchers: the weighted split of the
        concurrency and the prefetch window (or *shares*), less what is
        already in flight per queue."""
        busy: dict[str, int] = {}
        # A single delivery holds one slot; a whole batch delivery holds one.
        for queue in [r.queue for r in self.inflight.values() if r.group_lease is None] + [
            g.queue for g in self.groups.values()
        ]:
            busy[queue] = busy.get(queue, 0) + 1
        for queue, credit in (shares or split_capacity(self.concurrency + self.prefetch, self.queues)).items():
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

    # -- refill ----------------------------------------------------------------------

    def wants_refill(self, queue: str, credit: int) -> bool:
        """Whether *credit* free slots of *queue* are worth a lease now.

        Without a prefetch window, always. With one: when the worker holds no
        more of the queue than its share of the concurrency (a slot of it may
        be idle: lease at once), or when the free credit has reached half the
        queue's share of the window. In between, tasks are still waiting in
        the worker's window, and the credit coming back one result at a time
        is gathered into one larger lease instead of one lease per result.
        """
        if credit <= 0:
            return False
        if not self.prefetch:
            return True
        rule = self._refill.get(queue)
        if rule is None:
            run = split_capacity(self.concurrency, self.queues).get(queue, 1)
            total = split_capacity(self.concurrency + self.prefetch, self.queues).get(queue, run)
            rule = self._refill[queue] = (run, max(1, (total - run) // 2))
        run, batch = rule
        return credit >= batch or self.held(queue) <= run

    def held(self, queue: str | None = None) -> int:
        """Deliveries of *queue* (None: of every queue) in flight here, running
        or waiting in the window (a batch counts one)."""
        if not self.groups and (queue is None or len(self.queues) == 1):
            return len(self.inflight)
        singles = sum(1 for r in self.inflight.values() if r.group_lease is None and queue in (None, r.queue))
        return singles + sum(1 for g in self.groups.values() if queue in (None, g.queue))

    def runs_at_once(self) -> bool:
        """Whether the worker starts the next delivery the moment it reads it.

        Without a window it runs all it holds. With one: when the session's
        deliveries, the next one included, fit in its concurrency. The worker
        holds no more deliveries than this node holds for it (one is dropped
        here only when its result arrives, or with a `cancel` sent ahead of
        any later dispatch), so it then has a free slot for this one and for
        any still waiting in its window, and need not say `started` for it
        (docs/protocol.md §6.6).
        """
        return not self.prefetch or self.held() < self.concurrency

    # -- delivery --------------------------------------------------------------------

    def deliver(self, queue: str, tasks: list[Task]) -> None:
        """Take ownership of leased tasks and push them to the worker."""
        for task in tasks:
            self._supersede(task.id)
            self.inflight[task.id] = Inflight(task, queue, started=self.runs_at_once())
            self.node.leases[task.id] = self
        openable = self._openable(tasks)
        if openable:
            self.push_tasks(queue, openable)

    def flush(self) -> None:
        """Push what ``deliver`` queued at once, if pushes are queued (they are sent together at the end of the loop turn)."""

    def deliver_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        """Push a fired group as one batch; it costs one credit."""
        lease_id = tasks[0].lease_id or ""
        for task in tasks:
            self._supersede(task.id)
        started = self.runs_at_once()  # the whole batch is one delivery
        for task in tasks:
            self.inflight[task.id] = Inflight(task, queue, group_lease=lease_id, started=started)
            self.node.leases[task.id] = self
        self.groups[lease_id] = GroupInflight(lease_id, queue, tasks[0].type, {t.id for t in tasks})
        tasks = self._openable(tasks)
        if tasks:
            self.push_group(queue, group, tasks)

    def _openable(self, tasks: list[Task]) -> list[Task]:
        """The tasks whose payload this node could open; each other one fails
        at once as an attempt, with why (it is never pushed: a worker or an
        endpoint never gets ciphertext, nor an empty payload in its place)."""
        unopened = [t for t in tasks if t.seal_error]
        for task in unopened:
            self.settle(task.id, p.RETRY, ServerText(f"not run: {task.seal_error}"))
        return [t for t in tasks if not t.seal_error] if unopened else tasks

    def _forget(self, task_id: str) -> None:
        # Only our own entry: the task may already be in flight again under
        # a new lease, on another gateway of this node, which cancels must reach.
        if self.node.leases.get(task_id) is self:
            del self.node.leases[task_id]

    def _supersede(self, task_id: str) -> None:
        # The task came back to this same worker under a new lease (its old
        # lease expired and the reaper re-queued it): the old delivery is
        # dead; free its slot and tell the worker to drop it.
        if task_id in self.inflight:
            self.lose(task_id, "superseded by a new delivery")

    def push_tasks(self, queue: str, tasks: list[Task]) -> None:
        raise NotImplementedError

    def push_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        raise NotImplementedError

    def push_cancel(self, task_id: str, lease_id: str, reason: str) -> None:
        raise NotImplementedError

    # -- outcomes --------------------------------------------------------------------

    def settle(
        self,
        task_id: str,
        outcome: str,
        error: str = "",
        result: Any = None,
        lease_id: str | None = None,
        traceback: str = "",
    ) -> bool:
        """Apply a worker's outcome for one task; False if it is not ours (anymore).
        A failure's *traceback* goes to its attempt (not to last_error).

        A result naming a lease other than the one in flight is stale (from
        an earlier delivery of the same task) and is dropped.
        """
        record = self.inflight.get(task_id)
        if record is None or (lease_id and lease_id != record.task.lease_id):
            logger.debug("dropped a result for %s: not in flight under lease %s", task_id, lease_id)
            return False
        del self.inflight[task_id]
        self._forget(task_id)
        self._note_resolved()
        task, node = record.task, self.node
        if outcome == p.SUCCESS:
            node.acks.submit(task, encode_result(result), self.runner)
        elif outcome == p.RELEASED:
            node.spawn(self._apply(node.broker.release_many, [(task.id, task.lease_id or "")], by=self.runner))
        else:
            error = error or "task failed"
            node.spawn(
                self._apply(
                    node.broker.settle_failure,
                    task.id,
                    task.lease_id or "",
                    error,
                    skip_retry=outcome == p.SKIP_RETRY,
                    by=self.runner,
                    traceback=traceback,
                )
            )
        now = time.monotonic()
        # A release counts against the type too: a worker that keeps giving a
        # type back (it has no handler) is then fed it slowly, not in a loop.
        self.breaker.record(task.type, outcome == p.SUCCESS, now)
        metrics.PROCESS_DURATION.labels(record.queue, task.type).observe(now - record.since)
        self._slot_freed(record)
        return True

    async def _apply(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run a broker outcome off the loop; a lost lease is expected, not an error."""
        try:
            await self.node.db.run(fn, *args, **kwargs)
        except LeaseLost as exc:
            logger.info("dropped an outcome for %s: its lease was lost", exc.task_id)

    def settle_group(self, lease_id: str, results: dict[str, tuple[str, str, Any, str]]) -> bool:
        """Apply a batch result: listed members by outcome, the rest released."""
        group = self.groups.get(lease_id)
        if group is None:
            return False
        for task_id in sorted(group.pending):
            outcome, error, result, trace = results.get(task_id, (p.RELEASED, "", None, ""))
            self.settle(task_id, outcome, error, result, traceback=trace)
        return True

    def _slot_freed(self, record: Inflight) -> None:
        """One delivery resolved: give its slot back (a batch's when its last member resolves)."""
        if record.group_lease is None:
            self._refund(record.queue, record.task.type)
            return
        group = self.groups.get(record.group_lease)
        if group is None:
            return
        group.pending.discard(record.task.id)
        if not group.pending:
            del self.groups[record.group_lease]
            self._refund(group.queue, group.task_type)

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
        """Extra slots the worker opened without finishing a task (*n* in all)."""
        shares = {queue: n} if queue else spread(n, self.queues)
        for q, share in shares.items():
            dispatcher = self.node.dispatchers.get(q)
            if dispatcher is not None and q in self.queues and share > 0:
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

    def mark_started(self, task_ids: list[str]) -> None:
        """The worker started these (out of its prefetch window): a crash now
        involves them (those started at delivery already did)."""
        for task_id in task_ids:
            record = self.inflight.get(task_id)
            if record is not None:
                record.started = True

    def lose(self, task_id: str, reason: str) -> None:
        """The lease is gone: tell the worker to stop and give the credit back."""
        record = self.inflight.pop(task_id, None)
        if record is None:
            return
        self._forget(task_id)
        self._note_resolved()
        self.push_cancel(task_id, record.task.lease_id or "", reason)
        self._slot_freed(record)

    def cancel(self, task_id: str, lease_id: str) -> None:
        """An operator canceled a running task: ask the worker to abort it."""
        record = self.inflight.get(task_id)
        if record is not None and (not lease_id or record.task.lease_id == lease_id):
            self.push_cancel(task_id, record.task.lease_id or "", "canceled")

    # -- endings -----------------------------------------------------------------------

    async def wait_resolved(self, timeout: float, busy: Callable[[], bool] | None = None) -> None:
        """The node's drain: wait up to *timeout* seconds while *busy* (default:
        anything in flight), so that tasks about to finish report their
        results instead of being given back and run again."""
        busy = busy or (lambda: bool(self.inflight))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while busy() and (left := deadline - loop.time()) > 0:
                self._resolved = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._resolved.wait(), left)
        finally:
            self._resolved = None

    def _note_resolved(self) -> None:
        if self._resolved is not None:
            self._resolved.set()

    async def release_all(self) -> None:
        """Graceful end: every task still in flight goes back, no retry spent."""
        refs = self._take_all()
        if refs:
            await self.node.db.run(self.node.broker.release_many, refs, by=self.runner)

    async def crashed(self) -> None:
        """Abrupt end (the worker's connection dropped): crash attribution
        decides what each started task is charged (conveyor/broker/crashes.py),
        whether the worker said so or it was started at delivery
        (``runs_at_once``); those still waiting in the prefetch window go back,
        nothing spent."""
        idle = {tid for tid, record in self.inflight.items() if not record.started}
        refs = self._take_all()
        if refs:
            started = [ref for ref in refs if ref[0] not in idle]
            waiting = [ref for ref in refs if ref[0] in idle]
            await self.node.db.run(self.node.broker.settle_crash, started, idle=waiting, by=self.runner)

    def holds_suspect(self) -> bool:
        """Whether a suspect of an earlier crash is in flight here (the dispatcher sends no second one)."""
        return any(record.task.suspect for record in self.inflight.values())

    def _take_all(self, keep: Callable[[str], bool] = lambda _task_id: False) -> list[tuple[str, str]]:
        refs = []
        for task_id, record in list(self.inflight.items()):
            if keep(task_id):
                continue
            refs.append((task_id, record.task.lease_id or ""))
            del self.inflight[task_id]
            self._forget(task_id)
        self.groups.clear()
        self._note_resolved()
        return refs


def encode_result(result: Any) -> bytes | None:
    if result is None:
        return None
    return json.dumps(result, separators=(",", ":")).encode()
