"""The per-node queue dispatcher: lease due tasks and push them to gateways.

One dispatcher per queue per node. It reacts to wakes (a task became due)
and to freed credit, leases ``min(free credit, batch max)`` tasks in one
transaction and spreads them over its gateways by smooth weighted
round-robin. It keeps no durable state: everything it knows is rebuilt from
the gateways that register with it and from the database.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from conveyor import metrics
from conveyor.broker.lease import on_locked_path
from conveyor.conf import conveyor_settings

if TYPE_CHECKING:
    from conveyor.dispatch.gateway import Gateway
    from conveyor.dispatch.node import Node
    from conveyor.models import Task

logger = logging.getLogger("conveyor.dispatch")

ERROR_BACKOFF = 1.0
GROUP_FALLBACK_DELAY = 0.25
OFFER_GATHER = 0.05  # s freed credit waits to be offered while other offers are open


@dataclass
class Slot:
    gateway: Gateway
    weight: int
    credit: int
    current: int = 0  # smooth weighted round-robin state


class QueueDispatcher:
    def __init__(self, node: Node, queue: str) -> None:
        self.node = node
        self.queue = queue
        self.slots: dict[str, Slot] = {}
        self._leasing = False
        self._wanted = False
        # True after a lease found the queue empty (of due, dispatchable
        # work) and nothing said otherwise since: freed credit alone then
        # does not lease again. Every enqueue, release, retry timer and sweep
        # sends a wake, which clears it.
        self._drained = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._self_check: asyncio.TimerHandle | None = None
        self._withdrawing = False  # taking our offers back (conveyor.dispatch.offers)
        self._offering = False  # an offer of freed credit is scheduled
        self._offerable = False  # the last lease found the queue drained and not paused or limited
        self._firing = 0  # groups being leased
        self.leases = 0  # lease queries made (for tests and metrics)

    # -- gateways and credit -----------------------------------------------------

    def add_gateway(self, gateway: Gateway, credit: int, weight: int) -> None:
        offers = self.node.offers
        if offers is not None:
            credit -= offers.lent_by(self.queue, gateway.key)  # back when withdrawn, or busy
        self.slots[gateway.key] = Slot(gateway, max(1, weight), max(0, credit))
        self.look()

    def remove_gateway(self, gateway: Gateway) -> None:
        self.slots.pop(gateway.key, None)
        if self._lent(gateway.key):
            self.node.spawn(self._withdraw(gateway.key))

    def refund(self, gateway: Gateway, n: int = 1) -> None:
        slot = self.slots.get(gateway.key)
        if slot is not None:
            slot.credit += n
            if not self._drained:
                # A worker with tasks waiting in its prefetch window is
                # topped up in larger batches (Gateway.wants_refill); what
                # waits is leased with the next lease of any gateway. While a
                # lease runs, its credit still counts in the slot: the lease
                # loop judges after distributing it.
                if self._leasing and gateway.prefetch:
                    return
                if gateway.wants_refill(self.queue, slot.credit):
                    self.kick()
            elif not self._offering:
                # One offer for the credit freed meanwhile: at once when none
                # is open, else after a moment (producers still have one to
                # take, and a steady trickle then costs one INSERT per batch
                # of freed credit, not one per task).
                self._offering = True
                self.node.loop.call_later(OFFER_GATHER if self._lent() else 0.0, self._offer)

    def _refill_wanted(self) -> bool:
        return any(s.gateway.wants_refill(self.queue, s.credit) for s in self.slots.values())

    def free_credit(self) -> int:
        return sum(s.credit for s in self.slots.values() if s.credit > 0)

    # -- wakes -----------------------------------------------------------------------

    def on_wake(self, at: float | None = None) -> None:
        """Something became due (now, or at the epoch second *at*)."""
        if at is not None:
            delay = at - datetime.now(UTC).timestamp()
            if delay > 0:
                self._arm_timer(delay)
                return
        self.look()

    def _arm_timer(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if self._timer is not None and not self._timer.cancelled() and self._timer_at <= when:
            return  # an earlier timer will look anyway
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.look()

    def look(self) -> None:
        """There may be new due work: lease (again), with our offers taken back first."""
        self._drained = False
        self.kick()
        if self._lent() and not self._withdrawing:
            self._withdrawing = True
            self.node.spawn(self._withdraw())

    async def _withdraw(self, gateway: str | None = None) -> None:
        """Take our offers (of *gateway*) back, then lease with the credit."""
        try:
            await self._take_back(gateway)
        finally:
            if gateway is None:
                self._withdrawing = False
        self.kick()
        if not self._leasing:
            self._schedule_self_check()  # no lease to schedule it (no credit came back, or the withdraw failed)

    def kick(self) -> None:
        """Lease now if there is credit; if a lease is running, lease again after it."""
        if self._leasing:
            self._wanted = True
            return
        if self.free_credit() <= 0 or self.node.stopping:
            return
        self._leasing = True
        self.node.spawn(self._lease_loop())

    async def _lease_loop(self) -> None:
        try:
            while True:
                self._wanted = False
                free = self.free_credit()
                n = min(free, conveyor_settings.LEASE_BATCH_MAX)
                if n <= 0 or self.node.stopping:
                    break
                batch = await self.node.lease(self.queue, n)
                self.leases += 1
                self._observe(batch)
                if batch.tasks:
                    self._distribute(batch.tasks)
                self._follow_hints(batch)
                if len(batch.tasks) < n and not self._wanted:
                    # Held back by a per-key limit: a completion may free a key.
                    self._drained = batch.throttled != "concurrency"
                    self._offerable = batch.throttled is None  # not paused, not rate-limited
                    break
                if not self._wanted and n == free and not self._refill_wanted():
                    break  # the credit freed meanwhile waits for its refill (refund)
        except Exception:
            logger.exception("lease on queue %s failed; retrying in %.0fs", self.queue, ERROR_BACKOFF)
            self._drained = False
            self._arm_timer(ERROR_BACKOFF)
        finally:
            self._leasing = False
        if self._drained:
            self._offer()
        self._schedule_self_check()

    def _offer(self) -> None:
        """The queue is drained: lend our free credit to producers (conveyor.dispatch.offers)."""
        self._offering = False
        offers = self.node.offers
        if offers is None or not offers.listening or self._leasing or self._withdrawing or self._firing:
            return
        if not (self._drained and self._offerable):
            return
        if self.node.stopping or on_locked_path(self.node.broker.db, self.queue):
            return  # the queue has limits that only a lease can honour
        gateways = []
        while (slot := self._pick()) is not None:
            slot.credit -= 1
            gateways.append(slot.gateway.key)
        if gateways:
            offers.offer(self.queue, gateways)

    def _observe(self, batch: Any) -> None:
        metrics.LEASE_QUERIES.labels(self.queue).inc()
        if batch.tasks:
            metrics.observe_dispatch(self.queue, ((t.started_at - t.due_at).total_seconds() for t in batch.tasks))
        if batch.throttled in ("rate", "concurrency"):
            metrics.THROTTLED.labels(self.queue, batch.throttled).inc()

    def _follow_hints(self, batch: Any) -> None:
        if batch.throttled == "rate" and batch.retry_after is not None:
            self._arm_timer(max(batch.retry_after, 0.001))
        elif batch.next_due_at is not None:
            self._arm_timer(max((batch.next_due_at - datetime.now(UTC)).total_seconds(), 0.0))

    def _schedule_self_check(self) -> None:
        # Backstop for a lost wake: with idle credit, look again in a few
        # seconds. Not the dispatch path: wakes are.
        if self._self_check is not None:
            self._self_check.cancel()
        if (self.free_credit() > 0 or self._lent()) and not self.node.stopping:
            period = conveyor_settings.DISPATCH_SELF_CHECK
            if not self.node.shared_layer:
                # No layer reaches us from other processes (CLI, Django code
                # on the in-memory layer): notice their changes within a second.
                period = min(period, 1.0)
            period *= 0.8 + 0.4 * random.random()
            self._self_check = asyncio.get_running_loop().call_later(period, self.look)

    # -- distribution ----------------------------------------------------------------

    def _distribute(self, tasks: list[Task]) -> None:
        """Hand tasks to gateways by smooth weighted round-robin over those with credit.

        A suspect of an earlier crash goes only to a gateway that holds no
        other suspect (conveyor/broker/crashes.py), so a crash it causes
        names it; one that no gateway can take now is given back for a moment.
        """
        plan: dict[str, list[Task]] = {}
        orphans: list[Task] = []
        deferred: list[Task] = []
        isolated: set[str] = set()  # gateways that hold a suspect, or get one now
        for task in tasks:
            if task.suspect:
                slot = self._pick(lambda s: s.gateway.key not in isolated and not s.gateway.holds_suspect())
                if slot is None:
                    (deferred if self._pick(dry=True) else orphans).append(task)
                    continue
                isolated.add(slot.gateway.key)
            else:
                slot = self._pick()
            if slot is None:
                orphans.append(task)
                continue
            slot.credit -= 1
            plan.setdefault(slot.gateway.key, []).append(task)
        for key, batch in plan.items():
            self.slots[key].gateway.deliver(self.queue, batch)
        if orphans:
            # Credit vanished while we leased (a worker left): give them back.
            refs = [(t.id, t.lease_id or "") for t in orphans]
            self.node.spawn(self.node.db.run(self.node.broker.release_many, refs))
        if deferred:
            refs = [(t.id, t.lease_id or "") for t in deferred]
            self.node.spawn(self.node.db.run(self.node.broker.defer_suspects, refs))

    def _pick(self, fit: Callable[[Slot], bool] | None = None, *, dry: bool = False) -> Slot | None:
        """The next slot with credit (that *fit* accepts) by smooth weighted
        round-robin; *dry*: only whether there is one, the rotation untouched."""
        if dry:
            return next((s for s in self.slots.values() if s.credit > 0 and (fit is None or fit(s))), None)
        best: Slot | None = None
        total = 0
        for slot in self.slots.values():
            if slot.credit <= 0 or (fit is not None and not fit(slot)):
                continue
            slot.current += slot.weight
            total += slot.weight
            if best is None or slot.current > best.current:
                best = slot
        if best is not None:
            best.current -= total
        return best

    # -- groups --------------------------------------------------------------------

    def fire_group(self, group: str, task_type: str) -> None:
        """Lease a fired group: as one batch to a worker that batches its type,
        else member by member. Nodes that can batch try at once; others wait a
        moment so a batching worker elsewhere gets the first chance. Credit
        lent out as offers counts: it is taken back first."""
        if (self.free_credit() <= 0 and not self._lent()) or self.node.stopping:
            return
        delay = 0.0 if self._can_batch(task_type) else GROUP_FALLBACK_DELAY
        self.node.loop.call_later(delay, lambda: self.node.spawn(self._fire(group)))

    async def _take_back(self, gateway: str | None = None) -> None:
        """Withdraw our open offers (of *gateway*); a failure is logged (the self-check tries again)."""
        try:
            await self.node.offers.withdraw(self.queue, gateway)  # type: ignore[union-attr]
        except Exception as exc:
            logger.warning("withdrawing the offers of queue %s failed: %s", self.queue, exc)

    def _lent(self, gateway: str | None = None) -> bool:
        offers = self.node.offers
        return offers is not None and offers.has_open(self.queue, gateway)

    def _can_batch(self, task_type: str) -> bool:
        return any(
            task_type in slot.gateway.batch_types and (slot.credit > 0 or self._lent(slot.gateway.key))
            for slot in self.slots.values()
        )

    async def _fire(self, group: str) -> None:
        self._firing += 1  # no new offers meanwhile: the group needs the credit
        try:
            if self._lent():
                await self._take_back()
            await self._fire_group(group)
        finally:
            self._firing -= 1
        self._offer()  # what the group left idle is offered again (if the queue is still drained)

    async def _fire_group(self, group: str) -> None:
        if self.free_credit() <= 0 or self.node.stopping:
            return
        try:
            batch = await self.node.db.run(self.node.broker.lease_group, self.queue, group, self.node.id)
        except Exception:
            logger.exception("leasing group %s/%s failed", self.queue, group)
            return
        if not batch.tasks:
            return
        slot = self.batch_gateway(batch.tasks[0].type)
        if slot is not None:
            slot.credit -= 1
            slot.gateway.deliver_group(self.queue, group, batch.tasks)
        else:
            self._distribute(batch.tasks)  # what credit cannot take goes back to pending

    def batch_gateway(self, task_type: str) -> Slot | None:
        """A gateway with credit that takes *task_type* as one batch."""
        for slot in self.slots.values():
            if slot.credit > 0 and task_type in slot.gateway.batch_types:
                return slot
        return None

    def close(self) -> None:
        for handle in (self._timer, self._self_check):
            if handle is not None:
                handle.cancel()
