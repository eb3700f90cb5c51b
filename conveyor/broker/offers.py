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
_TAKE_SQL: dict[bool, str] = {}


def _take_sql(visible_first: bool) -> str:
    sql = _TAKE_SQL.get(visible_first)
    if sql is None:
        columns = pg.task_columns()
        values = [_OVERRIDES.get(attname, "%s::jsonb" if attname == "metadata" else "%s") for _, attname in columns]
        no_flush = "set_config('synchronous_commit', 'off', true), " if visible_first else ""
        sql = _TAKE_SQL[visible_first] = (
            f"{_TAKE}INSERT INTO {Task._meta.db_table} ({', '.join(f'"{c}"' for c, _ in columns)}) "
            f"VALUES ({', '.join(values)}) "
            f"RETURNING {no_flush}lease_id, lease_holder, "
            "CASE WHEN lease_id IS NOT NULL THEN pg_notify((SELECT channel FROM o), lease_id || ' ' || %s) END"
        )
    return sql


class Take:
    """The statement that INSERTs one due task taking an offer of its queue if there is one.

    *values* are the new row's attribute values in field order
    (``enqueue.task_values``). *visible_first*: it commits without waiting
    for the flush (``pg.VISIBLE_FIRST``; the caller then waits for it, as
    in ``pg.while_flushing``); else durably. ``Take.of`` is None when the
    task cannot take an offer (``DISPATCH_OFFERS`` off, or too large for a
    notification): then it is a plain INSERT.
    """

    def __init__(self, values: list[Any], now: datetime, body: str, *, visible_first: bool) -> None:
        self.now = now
        self.expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        queue = values[_at()["queue"]]
        self.sql = _take_sql(visible_first)
        params: list[Any] = [queue, now, queue]
        plain, metadata, payload, expires_at, started_at = _param_plan()
        params += [values[i] for i in plain]  # the state and holder as if no offer was taken
        params[3 + metadata] = json.dumps(params[3 + metadata] or {})
        params[3 + payload] = bytes(params[3 + payload])  # (a memoryview from a model read back)
        params[3 + expires_at] = self.expires
        params[3 + started_at] = now
        params.append(body)
        self.params = params

    @classmethod
    def of(cls, values: list[Any], now: datetime, *, visible_first: bool) -> Take | None:
        if not conveyor_settings.DISPATCH_OFFERS:
            return None
        expires = now + timedelta(seconds=conveyor_settings.LEASE_TTL)
        body = offered_body(values, now, expires)
        return None if body is None else cls(values, now, body, visible_first=visible_first)

    def taken(self, row: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """From the statement's row: None, or for a task that took an offer what
        its row says of its lease (state, lease id, holder, lease expiry, start)."""
        lease_id, holder = row[-3], row[-2]
        return None if lease_id is None else (State.ACTIVE, lease_id, holder, self.expires, self.now)


def mark_taken(task: Task, taken: tuple[Any, ...]) -> None:
    """Say on *task* what ``Take.taken`` said of its row (state, lease id, holder, lease expiry, start)."""
    task.state, task.lease_id, task.lease_holder, task.lease_expires_at, task.started_at = taken


def insert_taking_offer(using: str, values: list[Any], now: datetime) -> tuple[Any, ...] | None:
    """INSERT one due task in autocommit, visible at once (as ``pg.insert_visible_first``),
    taking an offer of its queue if there is one (``Take``); what ``Take.taken`` says.
    Its node has it when the statement commits."""
    take = Take.of(values, now, visible_first=True)
    if take is None:
        pg.insert_visible_first(using, Task(*values))
        return None
    return take.taken(pg.run(using, take.sql, take.params)[0])


_PLAN: tuple[list[int], int, int, int, int] | None = None


def _param_plan() -> tuple[list[int], int, int, int, int]:
    """Which task values are the INSERT's parameters (all but the lease id,
    in column order), and where among them the metadata, the payload, the
    lease expiry and the start go."""
    global _PLAN
    if _PLAN is None:
        names = [attname for _, attname in pg.task_columns()]
        kept = [i for i, name in enumerate(names) if name != "lease_id"]
        at = {names[i]: n for n, i in enumerate(kept)}
        _PLAN = (kept, at["metadata"], at["payload"], at["lease_expires_at"], at["started_at"])
    return _PLAN


_AT: dict[str, int] = {}


def _at() -> dict[str, int]:
    """attname -> its position among a task's values."""
    if not _AT:
        _AT.update({attname: i for i, (_, attname) in enumerate(pg.task_columns())})
    return _AT


def offered_body(values: list[Any], started: datetime, expires: datetime) -> str | None:
    """The task as its node will lease it (lease id and holder aside), as JSON;
    None when too large for a notification."""
    out: list[Any] = [None if i is None else values[i] for i in _body_plan()]
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


_compact_json = json.JSONEncoder(separators=(",", ":")).encode


_STATE, _PAYLOAD = LEASED_FIELDS.index("state"), LEASED_FIELDS.index("payload")
_STARTED, _EXPIRES = LEASED_FIELDS.index("started_at"), LEASED_FIELDS.index("lease_expires_at")
_BODY_DATETIMES = [i for i, name in enumerate(LEASED_FIELDS) if name in _DATETIMES]
_BODY_PLAN: list[int | None] = []


def _body_plan() -> list[int | None]:
    """For each leased field, the position of its task value (None: the offer's)."""
    if not _BODY_PLAN:
        at = _at()
        _BODY_PLAN.extend(None if name in _FROM_THE_OFFER else at[name] for name in LEASED_FIELDS)
    return _BODY_PLAN


def offered_task(body: str, lease_id: str, holder: str) -> LeasedTask:
    """The leased task a notification carries (``offered_body``'s inverse)."""
    row = dict(zip(LEASED_FIELDS, json.loads(body), strict=True))
    row["payload"] = base64.b64decode(row["payload"])
    for name in _DATETIMES:
        if row[name] is not None:
            row[name] = datetime.fromisoformat(row[name])
    row["lease_id"], row["lease_holder"] = lease_id, holder
    return LeasedTask(**row)
