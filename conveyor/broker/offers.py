"""Offers: a producer's INSERT that hands its task straight to an idle node.

A node whose queue is drained offers its free credit as rows of
``conveyor_offer`` (conveyor.dispatch.offers). An enqueue of one plain,
due task may take one of them in the statement that stores it: the offer
row is deleted, the task is inserted already leased (the offer's lease id,
the offer's node as holder) and ``pg_notify`` sends the task to the node's
channel. PostgreSQL delivers the notification when the INSERT commits, so
the task reaches a worker with no wake through Redis and no lease query
(docs/architecture.md, "Offers").

The statement takes an offer only when the queue is not paused and has no
rate limit, concurrency limit or random order (what the node's own lease
would check), and only an offer that has not expired. Everything else
about the task is what the plain INSERT stores.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

from conveyor.broker.rows import NewTask
from conveyor.broker.types import LEASED_FIELDS, LeasedTask
from conveyor.conf import conveyor_settings
from conveyor.models import Task
from conveyor.states import State
from conveyor.store import Store, cell, task_columns

# PostgreSQL refuses a notification payload of 8,000 bytes or more; the
# lease id and a space go before the task. A larger task is stored and
# woken for the ordinary way.
BODY_MAX = 7800
_DATETIMES = frozenset({"due_at", "enqueued_at", "expires_at", "deadline", "lease_expires_at", "started_at"})
_FROM_THE_OFFER = frozenset({"lease_id", "lease_holder"})
# What the notification carries as the row stores it, after the body (the
# payload sealed under the key id when the row has one): not in the body.
_FROM_THE_ROW = frozenset({"payload", "key_id"})
# What sealing adds to a payload: the envelope's header but the key id, the nonce, the tag.
_SEALING_OVERHEAD = 2 + 12 + 16

# Positions among a task's values (field order, as ``enqueue.task_values`` gives them).
_AT = {attname: i for i, (_, attname) in enumerate(task_columns())}
# The notification body: each leased field's value position (None: the offer's).
_BODY = [None if name in _FROM_THE_OFFER | _FROM_THE_ROW else _AT[name] for name in LEASED_FIELDS]
_STATE = LEASED_FIELDS.index("state")
_PAYLOAD_AT, _KEY_AT = _AT["payload"], _AT["key_id"]
_STARTED, _EXPIRES = LEASED_FIELDS.index("started_at"), LEASED_FIELDS.index("lease_expires_at")
_BODY_DATETIMES = [i for i, name in enumerate(LEASED_FIELDS) if name in _DATETIMES]
_compact_json = json.JSONEncoder(separators=(",", ":")).encode

# After a take that found no offer of its queue, a broker's next enqueues to
# that queue skip looking for one for this long: they are plain INSERTs,
# woken for as usual. Looking costs the INSERT about a third more work in
# PostgreSQL; a queue with no idle worker (a backlog, a busy producer, a
# paused or rate-limited queue) would pay it on every enqueue for nothing.
# Short enough that a trickle (a task every few milliseconds) always looks.
MISS_PAUSE = timedelta(milliseconds=2)
MISSES_KEPT = 1024  # queues remembered per broker; past it, all are forgotten


class Misses:
    """Per broker (so per process): queue -> until when its enqueues look for
    no offer (by the broker's clock). Shared by the broker's threads: each
    step is one dict operation, and a lost update costs one look more."""

    def __init__(self) -> None:
        self._until: dict[str, datetime] = {}

    def skip(self, queue: str, now: datetime) -> bool:
        until = self._until.get(queue)
        if until is None:
            return False
        if now < until <= now + MISS_PAUSE:  # (a clock set back does not stretch the pause)
            return True
        self._until.pop(queue, None)
        return False

    def missed(self, queue: str, now: datetime) -> None:
        if len(self._until) >= MISSES_KEPT:
            self._until.clear()
        self._until[queue] = now + MISS_PAUSE

    def found(self, queue: str) -> None:
        self._until.pop(queue, None)


class Take:
    """One due task's INSERT that takes an offer of its queue if there is one
    (``insert_one_taking_offer`` in conveyor/store/queries.sql).

    ``Take.of`` is None when the task cannot take an offer (too large for a
    notification, or its queue pausing after a miss): then it is a plain INSERT.
    """

    def __init__(self, queue: str, now: datetime, expires: datetime, body: str, misses: Misses | None) -> None:
        self.queue, self.now, self.expires, self.body, self.misses = queue, now, expires, body, misses

    @classmethod
    def of(cls, values: list[Any], now: datetime, *, misses: Misses | None = None) -> Take | None:
        """*values*: the new row's attribute values in field order (``rows.task_values``).
        *misses*: the broker's (``MISS_PAUSE``); a take that finds no offer is
        noted there, and None is returned while its queue's pause lasts."""
        queue = values[_AT["queue"]]
        if misses is not None and misses.skip(queue, now):
            return None
        expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        body = offered_body(values, now, expires)
        if body is None:
            return None
        return cls(queue, now, expires, body, misses)

    def params(self, values: list[Any]) -> dict[str, Any]:
        """The statement's parameters: the task's (state and holder as if no
        offer was taken), the lease's times if one is, the notification body."""
        params = insert_params(values)
        params.update(now=self.now, body=self.body, lease_expires_at=self.expires, started_at=self.now)
        return params

    def taken(self, row: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """From the statement's row: None, or for a task that took an offer what
        its row says of its lease (``LEASE_FIELDS``' values)."""
        lease_id, holder = row[-3], row[-2]
        if lease_id is None:
            if self.misses is not None:
                self.misses.missed(self.queue, self.now)
            return None
        if self.misses is not None:
            self.misses.found(self.queue)
        return (State.ACTIVE, lease_id, holder, self.expires, self.now)


_NAMES = [attname for _, attname in task_columns()]
_METADATA_AT = _AT["metadata"]
# The columns that may hold a memoryview (``cell`` makes it bytes).
_BINARY_AT = [i for i, field in enumerate(Task._meta.concrete_fields) if field.get_internal_type() == "BinaryField"]


def insert_params(values: list[Any]) -> dict[str, Any]:
    """A new row's attribute values (field order) as a one-task INSERT's named
    parameters, each as ``cell`` makes it (only metadata and bytes change)."""
    params = dict(zip(_NAMES, values, strict=True))
    params["metadata"] = cell(values[_METADATA_AT], "metadata")
    for i in _BINARY_AT:
        if isinstance(values[i], memoryview):
            params[_NAMES[i]] = bytes(values[i])
    return params


LEASE_FIELDS = ("state", "lease_id", "lease_holder", "lease_expires_at", "started_at")


def set_lease(task: Task | NewTask, values: tuple[Any, ...]) -> None:
    """Set *task*'s ``LEASE_FIELDS`` (as ``Take.taken`` gives them, or as read back)."""
    task.state, task.lease_id, task.lease_holder, task.lease_expires_at, task.started_at = values


def insert_taking_offer(store: Store, db: str, values: list[Any], now: datetime, misses: Misses | None = None) -> Task:
    """INSERT one due task in autocommit, taking an offer of its queue if there
    is one (``Take``; *misses* as there), and return it as stored (durable),
    a ``Task`` instance of database *db*."""
    take = Take.of(values, now, misses=misses)
    params = take.params(values) if take is not None else insert_params(values)
    row = store.insert_one(params, take_offer=take is not None)
    task = Task.from_plaintext(db, values)
    taken = take.taken(row) if take is not None and row is not None else None
    if taken is not None:
        set_lease(task, taken)
    return task


def offered_body(values: list[Any], started: datetime, expires: datetime) -> str | None:
    """The task as its node will lease it (lease id and holder aside), as JSON;
    None when too large for a notification."""
    out: list[Any] = [None if i is None else values[i] for i in _BODY]
    out[_STATE] = State.ACTIVE
    out[_STARTED], out[_EXPIRES] = started, expires
    texts = {started: started.isoformat()}  # enqueued, due and started are often the same instant
    for i in _BODY_DATETIMES:
        when = out[i]
        if when is not None:
            text = texts.get(when)
            out[i] = text if text is not None else texts.setdefault(when, when.isoformat())
    body = _compact_json(out)
    key_id, payload = values[_KEY_AT], values[_PAYLOAD_AT]
    stored = len(payload) + (_SEALING_OVERHEAD + len(key_id) if key_id and payload else 0)
    encoded = -(-stored // 3) * 4
    encoded += encoded // 76  # PostgreSQL's encode() breaks base64 into lines of 76
    return body if len(body) + len(key_id or "") + encoded + 2 <= BODY_MAX else None


def offered_task(notification: str, holder: str) -> LeasedTask:
    """The leased task a notification carries: ``lease_id key_id body payload``
    (``insert_one_taking_offer``: the body is ``offered_body``'s, the key id
    and the base64 payload are the row's), opened."""
    lease_id, _, rest = notification.partition(" ")
    key_id, _, rest = rest.partition(" ")
    body, _, encoded = rest.rpartition(" ")  # (base64 has no spaces; the body may)
    row = dict(zip(LEASED_FIELDS, json.loads(body), strict=True))
    for name in _DATETIMES:
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    row["lease_id"], row["lease_holder"] = lease_id, holder
    row["payload"] = base64.b64decode(encoded)  # (skips the line breaks)
    row["key_id"] = key_id or None
    return LeasedTask.from_row([row[name] for name in LEASED_FIELDS])
