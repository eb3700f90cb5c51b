"""A node's offers of idle capacity, and the tasks producers hand it through them.

When a queue's dispatcher finds the queue drained and still has free
credit, it lends that credit out: one ``conveyor_offer`` row per credit,
each with a lease id of its own, the node's id and the node's LISTEN
channel. A producer's INSERT of one plain due task may take an offer
(conveyor.broker.offers): the task is stored already leased under the
offer's lease id, and PostgreSQL notifies the node when it commits. The
node then pushes it to the gateway whose credit the offer lent, with no
wake through Redis and no lease query (docs/architecture.md, "Offers").

The node takes its credit back before it leases (every wake, and the
dispatcher's self-check every few seconds): it deletes its open offers.
Each one it can no longer delete was taken, and the DELETE waited for the
taker's commit, so that task is stored; its notification normally arrives
within milliseconds, and if it has not after ``RECONCILE_AFTER`` (a LISTEN
connection that dropped, say) the node reads the task by its lease id.
Offers are made only while the LISTEN is up, and they expire after
``3 * DISPATCH_SELF_CHECK``, so those of a node that died stop being taken;
a task taken in that window waits for its lease to expire, like any task
of a dead node.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from conveyor import metrics
from conveyor.broker.base import run_now
from conveyor.broker.lease import leased_row
from conveyor.broker.offers import offered_task
from conveyor.conf import conveyor_settings
from conveyor.dispatch.loop_lease import close_quietly
from conveyor.ids import new_ulid, random_token

if TYPE_CHECKING:
    from conveyor.broker.types import LeasedTask
    from conveyor.dispatch.node import Node

logger = logging.getLogger("conveyor.dispatch")

RECONCILE_AFTER = 1.0  # s a taken offer's notification may take before the node reads the task itself
LISTEN_BACKOFF_MAX = 5.0
ARRIVALS_KEPT = 10_000
APPLICATION_NAME = "conveyor-offers"  # the LISTEN connection's, in pg_stat_activity

_PLACE = (
    "INSERT INTO conveyor_offer (queue, channel, lease_id, holder, expires_at) "
    "SELECT %s, %s, unnest(%s::varchar[]), %s, %s"
)
WITHDRAW = "DELETE FROM conveyor_offer WHERE lease_id = ANY(%s::varchar[]) RETURNING lease_id"


@dataclass
class Lent:
    queue: str
    gateway: str  # the key of the gateway whose credit the offer lent
    placed: bool = False  # its row is in the table (until then no withdraw can find it)
    taken: float | None = None  # loop time the node found the offer taken


class OfferBook:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.channel = f"conveyor_offers_{random_token(8).lower()}"
        self.lent: dict[str, Lent] = {}  # lease id -> what it lent
        self.listening = False
        # Lease ids of the tasks that arrived lately: a late second arrival
        # of one (its notification, and a read of its row) changes nothing.
        self._arrived: OrderedDict[str, str] = OrderedDict()  # lease id -> task id
        self._lock = asyncio.Lock()  # placing and withdrawing never overlap
        self._reconcile: asyncio.TimerHandle | None = None

    @property
    def leaser(self) -> Any:
        return self.node.leaser

    def has_open(self, queue: str, gateway: str | None = None) -> bool:
        """Whether an offer of *queue* (and *gateway*) is out and not known to be taken."""
        return any(
            lent.taken is None and lent.queue == queue and (gateway is None or lent.gateway == gateway)
            for lent in self.lent.values()
        )

    def lent_by(self, queue: str, gateway: str) -> int:
        """Credit of *gateway* on *queue* that offers hold, taken or not."""
        return sum(1 for lent in self.lent.values() if lent.queue == queue and lent.gateway == gateway)

    # -- offering and withdrawing --------------------------------------------------

    def offer(self, queue: str, gateways: list[str]) -> None:
        """Lend one credit of each gateway listed (the caller took it off the slots)."""
        now = datetime.now(UTC)
        base = new_ulid(now)
        ids = [f"{base}.o{i}" for i in range(len(gateways))]
        for lease_id, key in zip(ids, gateways, strict=True):
            self.lent[lease_id] = Lent(queue, key)  # counted at once (the dispatcher's self-check looks)
        self.node.spawn(self._place(queue, ids, now), eager=True)  # in line for the lock now

    async def _place(self, queue: str, ids: list[str], now: datetime) -> None:
        expires = now + timedelta(seconds=3 * conveyor_settings.DISPATCH_SELF_CHECK)
        async with self._lock:
            try:
                await self.leaser.run(
                    lambda conn: conn.execute(_PLACE, [queue, self.channel, ids, self.node.id, expires])
                )
            except Exception as exc:
                # Placed or not (the answer may be what was lost): the next
                # withdraw settles them. One it can delete gives its credit
                # back; one it cannot is read a second later, and if no
                # task holds it, its credit comes back then.
                logger.warning("offering %d slots of queue %s failed: %s", len(ids), queue, exc)
            for lease_id in ids:
                lent = self.lent.get(lease_id)
                if lent is not None:
                    lent.placed = True

    async def withdraw(self, queue: str | None = None, gateway: str | None = None) -> None:
        """Take back the open offers (of *queue*, of *gateway*); those already
        taken are marked so, and their tasks are read if they do not arrive."""
        async with self._lock:
            ids = [
                lease_id
                for lease_id, lent in self.lent.items()
                if lent.placed
                and lent.taken is None
                and (queue is None or lent.queue == queue)
                and (gateway is None or lent.gateway == gateway)
            ]
            if not ids:
                return

            async def delete(conn: psycopg.AsyncConnection[Any]) -> set[str]:
                async with conn.cursor() as cursor:
                    await cursor.execute(WITHDRAW, [ids])
                    return {row[0] for row in await cursor.fetchall()}

            back = await self.leaser.run(delete)
        now = self.node.loop.time()
        for lease_id in ids:
            if lease_id in back:
                self._give_back(lease_id)
            elif lease_id in self.lent:  # taken, not yet arrived
                self.lent[lease_id].taken = now
                self._reconcile_later(RECONCILE_AFTER)

    def _give_back(self, lease_id: str) -> None:
        lent = self.lent.pop(lease_id, None)
        slot = self._slot(lent) if lent is not None else None
        if slot is not None:
            slot.credit += 1

    def _slot(self, lent: Lent) -> Any:
        """The dispatcher's slot of the gateway whose credit *lent* is (None if it has gone)."""
        dispatcher = self.node.dispatchers.get(lent.queue)
        return dispatcher.slots.get(lent.gateway) if dispatcher is not None else None

    # -- arrivals ------------------------------------------------------------------------

    def on_notification(self, payload: str) -> None:
        try:
            task = offered_task(payload, self.node.id)
        except Exception:
            logger.exception("unreadable offer notification %r", payload[:200])
            return
        self.arrived(task)

    def arrived(self, task: LeasedTask) -> None:
        """A task that took one of our offers: push it to the gateway whose credit the offer lent."""
        lease_id = task.lease_id or ""
        lent = self.lent.pop(lease_id, None)
        if lent is None:
            # Already here (its notification, then a read of its row), or
            # not an offer we hold (one a database crash gave back after
            # it was taken, taken again): that task is released.
            if self._arrived.get(lease_id) != task.id and task.id not in self.node.leases:
                self._release(task)
            return
        self._arrived[lease_id] = task.id
        if len(self._arrived) > ARRIVALS_KEPT:
            self._arrived.popitem(last=False)
        slot = self._slot(lent)
        if slot is None or self.node.stopping:
            self._release(task)  # its worker left meanwhile
            return
        slot.gateway.deliver(lent.queue, [task])
        slot.gateway.flush()  # one task, nothing to wait for
        if task.started_at is not None:
            metrics.observe_dispatch(lent.queue, [(task.started_at - task.due_at).total_seconds()])
        self.node.broker.emit("leased", [task], task.started_at or datetime.now(UTC), then=run_now)

    def _release(self, task: LeasedTask) -> None:
        refs = [(task.id, task.lease_id or "")]
        self.node.spawn(self.node.db.run(self.node.broker.release_many, refs))

    def _reconcile_later(self, delay: float) -> None:
        if self._reconcile is None:
            self._reconcile = self.node.loop.call_later(delay, lambda: self.node.spawn(self._read_taken()))

    async def _read_taken(self) -> None:
        """Read the tasks of taken offers whose notification has not come."""
        self._reconcile = None
        now = self.node.loop.time()
        due = [lid for lid, lent in self.lent.items() if lent.taken is not None and now - lent.taken >= RECONCILE_AFTER]
        if len(due) < sum(1 for lent in self.lent.values() if lent.taken is not None):
            self._reconcile_later(RECONCILE_AFTER)
        if not due:
            return

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            return await self.node.broker.store.ataken(conn, due, self.node.id)  # type: ignore[attr-defined,no-any-return]

        try:
            rows = await self.leaser.run(read)
        except Exception as exc:
            logger.warning("reading the tasks of %d taken offers failed (%s); retrying", len(due), exc)
            self._reconcile_later(RECONCILE_AFTER)
            return
        if rows:
            logger.info("read %d tasks of taken offers whose notification had not come", len(rows))
        for row in rows:
            self.arrived(leased_row(row))
        for lease_id in due:
            lent = self.lent.get(lease_id)
            if lent is not None:
                # Taken, and its task is no longer ours (canceled, or its
                # lease expired meanwhile): the credit is free again.
                self._give_back(lease_id)
                dispatcher = self.node.dispatchers.get(lent.queue)
                if dispatcher is not None:
                    dispatcher.kick()

    # -- the LISTEN connection -------------------------------------------------------------

    async def listen(self) -> None:
        """Hold the LISTEN; offers are made only while it is up."""
        backoff = 0.1
        while not self.node.stopping:
            conn = None
            try:
                conn = await self.leaser.connect(application_name=APPLICATION_NAME)
                await conn.execute(f'LISTEN "{self.channel}"')
                self.listening = True
                backoff = 0.1
                # Notifications sent while we were not listening are lost:
                # find the offers taken meanwhile and read their tasks.
                await self.withdraw()
                for dispatcher in list(self.node.dispatchers.values()):
                    dispatcher.look()
                while True:
                    async for note in conn.notifies(timeout=conveyor_settings.DISPATCH_SELF_CHECK):
                        self.on_notification(note.payload)
                    await conn.execute("SELECT 1")  # a connection that died quietly fails here
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self.node.stopping:
                    logger.warning("offers: LISTEN connection failed (%s); retrying in %.1fs", exc, backoff)
            finally:
                self.listening = False
                if conn is not None:
                    await close_quietly(conn)
            await asyncio.sleep(backoff)
            backoff = min(LISTEN_BACKOFF_MAX, backoff * 2)

    async def close(self) -> None:
        """Stop offering; take back every open offer (a node that drains)."""
        self.listening = False
        try:
            await self.withdraw()
        except Exception:
            logger.warning("withdrawing offers failed; they expire on their own", exc_info=True)
