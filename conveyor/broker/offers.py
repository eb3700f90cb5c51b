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

from conveyor.broker import pg
from conveyor.broker.rows import task_from_values
from conveyor.broker.types import LEASED_FIELDS, LeasedTask
from conveyor.conf import conveyor_settings
from conveyor.models import Task
from conveyor.states import State

# PostgreSQL refuses a notification payload of 8,000 bytes or more; the
# lease id and a space go before the task. A larger task is stored and
# woken for the ordinary way.
BODY_MAX = 7800
_DATETIMES = frozenset({"due_at", "enqueued_at", "expires_at", "deadline", "lease_expires_at", "started_at"})
_FROM_THE_OFFER = frozenset({"lease_id", "lease_holder"})

_TAKE = (
    "WITH o AS (DELETE FROM conveyor_offer WHERE id = ("
    "SELECT id FROM conveyor_offer WHERE queue = %s AND expires_at > %s "
    "AND NOT EXISTS (SELECT 1 FROM conveyor_queue WHERE name = %s AND (paused OR COALESCE(rate, 0) <> 0 "
    "OR COALESCE(concurrency_limit, 0) <> 0 OR policy = 'random')) "
    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING channel, lease_id, holder) "
)
# Columns the offer decides; each takes the parameters listed.
_OVERRIDES = {
    "state": "COALESCE((SELECT 'active'::varchar FROM o), %s)",
    "lease_id": "(SELECT lease_id FROM o)",
    "lease_expires_at": "(SELECT %s::timestamptz FROM o)",
    "lease_holder": "COALESCE((SELECT holder FROM o), %s)",
    "started_at": "(SELECT %s::timestamptz FROM o)",
}
_TAKE_SQL: list[str] = []


def _take_sql() -> str:
    if not _TAKE_SQL:
        columns = pg.task_columns()
        values = [_OVERRIDES.get(attname, "%s::jsonb" if attname == "metadata" else "%s") for _, attname in columns]
        _TAKE_SQL.append(
            f"{_TAKE}INSERT INTO {Task._meta.db_table} ({', '.join(f'"{c}"' for c, _ in columns)}) "
            f"VALUES ({', '.join(values)}) "
            "RETURNING lease_id, lease_holder, "
            "CASE WHEN lease_id IS NOT NULL THEN pg_notify((SELECT channel FROM o), lease_id || ' ' || %s) END"
        )
    return _TAKE_SQL[0]


# Positions among a task's values (field order, as ``enqueue.task_values`` gives them).
_AT = {attname: i for i, (_, attname) in enumerate(pg.task_columns())}
# The INSERT's parameters after the offer's three: every value but the lease id.
_KEPT = [i for attname, i in _AT.items() if attname != "lease_id"]
_PARAM = {attname: 3 + n for n, attname in enumerate(a for a in _AT if a != "lease_id")}
# The notification body: each leased field's value position (None: the offer's).
_BODY = [None if name in _FROM_THE_OFFER else _AT[name] for name in LEASED_FIELDS]
_STATE, _PAYLOAD = LEASED_FIELDS.index("state"), LEASED_FIELDS.index("payload")
_STARTED, _EXPIRES = LEASED_FIELDS.index("started_at"), LEASED_FIELDS.index("lease_expires_at")
_BODY_DATETIMES = [i for i, name in enumerate(LEASED_FIELDS) if name in _DATETIMES]
# The values ``pg.cell`` changes for a statement's parameters.
_CONVERTED = ("metadata", "payload")
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
    """The statement that INSERTs one due task taking an offer of its queue if there is one.

    *values* are the new row's attribute values in field order
    (``enqueue.task_values``). ``Take.of`` is None when the task cannot take
    an offer (too large for a notification, or its queue paused after a
    miss): then it is a plain INSERT.
    """

    def __init__(
        self,
        values: list[Any],
        now: datetime,
        expires: datetime,
        body: str,
        *,
        misses: Misses | None = None,
    ):
        self.now, self.expires, self.misses = now, expires, misses
        self.sql = _take_sql()
        self.queue = queue = values[_AT["queue"]]
        params: list[Any] = [queue, now, queue]
        params += [values[i] for i in _KEPT]  # the state and holder as if no offer was taken
        for name in _CONVERTED:
            params[_PARAM[name]] = pg.cell(params[_PARAM[name]], name)
        params[_PARAM["lease_expires_at"]], params[_PARAM["started_at"]] = expires, now
        params.append(body)
        self.params = params

    @classmethod
    def of(cls, values: list[Any], now: datetime, *, misses: Misses | None = None) -> Take | None:
        """*misses*: the broker's (``MISS_PAUSE``); a take that finds no offer is
        noted there, and None is returned while its queue's pause lasts."""
        if misses is not None and misses.skip(values[_AT["queue"]], now):
            return None
        expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        body = offered_body(values, now, expires)
        if body is None:
            return None
        return cls(values, now, expires, body, misses=misses)

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


LEASE_FIELDS = ("state", "lease_id", "lease_holder", "lease_expires_at", "started_at")


def set_lease(task: Task, values: tuple[Any, ...]) -> None:
    """Set *task*'s ``LEASE_FIELDS`` (as ``Take.taken`` gives them, or as read back)."""
    task.state, task.lease_id, task.lease_holder, task.lease_expires_at, task.started_at = values


def insert_taking_offer(using: str, values: list[Any], now: datetime, misses: Misses | None = None) -> Task:
    """INSERT one due task in autocommit, taking an offer of its queue if there
    is one (``Take``; *misses* as there), and return it as stored (durable)."""
    take = Take.of(values, now, misses=misses)
    sql, params = (take.sql, take.params) if take is not None else plain_insert(values)
    rows = pg.run(using, sql, params, fetch=take is not None)
    task = task_from_values(values)  # built after the INSERT, off the task's path
    taken = take.taken(rows[0]) if take is not None else None
    if taken is not None:
        set_lease(task, taken)
    return task


def plain_insert(values: list[Any]) -> tuple[str, list[Any]]:
    """``pg.insert_statement`` for one task, from its values (as ``Take``'s)."""
    params = list(values)
    for name in _CONVERTED:
        params[_AT[name]] = pg.cell(params[_AT[name]], name)
    return pg.values_sql(1), params


def offered_body(values: list[Any], started: datetime, expires: datetime) -> str | None:
    """The task as its node will lease it (lease id and holder aside), as JSON;
    None when too large for a notification."""
    out: list[Any] = [None if i is None else values[i] for i in _BODY]
    out[_STATE] = State.ACTIVE
    out[_PAYLOAD] = base64.b64encode(bytes(out[_PAYLOAD])).decode()
    out[_STARTED], out[_EXPIRES] = started, expires
    texts = {started: started.isoformat()}  # enqueued, due and started are often the same instant
    for i in _BODY_DATETIMES:
        when = out[i]
        if when is not None:
            text = texts.get(when)
            out[i] = text if text is not None else texts.setdefault(when, when.isoformat())
    body = _compact_json(out)
    return body if len(body) <= BODY_MAX else None


def offered_task(body: str, lease_id: str, holder: str) -> LeasedTask:
    """The leased task a notification carries (``offered_body``'s inverse)."""
    row = dict(zip(LEASED_FIELDS, json.loads(body), strict=True))
    row["payload"] = base64.b64decode(row["payload"])
    for name in _DATETIMES:
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    row["lease_id"], row["lease_holder"] = lease_id, holder
    return LeasedTask(**row)
