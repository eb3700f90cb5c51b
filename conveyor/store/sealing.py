"""The store every broker gets: the database's store, with encryption at rest around it.

``SealingStore`` stands between the broker and ``PostgresStore`` or
``SqliteStore`` and implements every method of the store interface by hand
(no delegation by ``__getattr__``): a method that writes or returns a
payload, a result or an error text seals or opens it here, and one that
does not says so by passing its call straight on. A method added to a
store without one here is not reachable from the broker at all, so no new
write path can store plaintext by omission (tests/store/test_sealing.py
checks that this class covers the interface).

Sealing is under the row's own key id (``key_id``, chosen when the row is
made: the active key then). Rows with none are stored as given. What the
inner store returns to the caller is opened: the completion's rows here,
the ORM's instances in ``Task.from_db``, a lease's rows where they become
``LeasedTask``s (conveyor/broker/lease.py, offers.py). See
conveyor/sealing.py and docs/encryption.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from conveyor import sealing
from conveyor.exceptions import KeyUnavailable
from conveyor.models import Task
from conveyor.store.base import KEY_UNKNOWN, Attempt, OutcomeRow, Resealed, Runner, Store, Wanted

_ERROR = sealing.TASK_COLUMNS["last_error"]
_RESULT = sealing.TASK_COLUMNS["result"]


class SealingStore:
    """Encryption at rest around a database's store (see the module's docstring)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.alias: str = inner.alias  # type: ignore[attr-defined]
        self.vendor = inner.vendor
        self.one_insert_in_autocommit = inner.one_insert_in_autocommit
        self.has_offers = inner.has_offers
        self.has_liveness = inner.has_liveness

    # -- enqueue: the payload and an error text (a task born canceled) ---------------

    def insert_tasks(self, tasks: Sequence[Task]) -> None:
        with _sealed_rows(tasks):
            self.inner.insert_tasks(tasks)

    def insert_one(self, params: dict[str, Any], *, take_offer: bool) -> tuple[Any, ...] | None:
        return self.inner.insert_one(sealing.seal_task_values(params), take_offer=take_offer)

    async def ainsert_one(self, conn: Any, params: dict[str, Any], *, take_offer: bool) -> tuple[Any, ...] | None:
        return await self.inner.ainsert_one(conn, sealing.seal_task_values(params), take_offer=take_offer)  # type: ignore[attr-defined]

    async def alease_of(self, conn: Any, task_id: str) -> tuple[Any, ...] | None:
        return await self.inner.alease_of(conn, task_id)  # type: ignore[attr-defined]  # (lease columns only)

    # -- lease: rows come back sealed and are opened as LeasedTasks (broker/lease.py) --

    def lease(self, params: dict[str, Any], policy: str) -> list[tuple[Any, ...]] | None:
        return self.inner.lease(params, policy)

    async def alease(self, conn: Any, params: dict[str, Any], policy: str) -> list[Any]:
        return await self.inner.alease(conn, params, policy)  # type: ignore[attr-defined]

    async def ataken(self, conn: Any, lease_ids: list[str], holder: str) -> list[Any]:
        return await self.inner.ataken(conn, lease_ids, holder)  # type: ignore[attr-defined]

    def select_due(self, due: Any, n: int, order: Sequence[str], index: str) -> list[Task]:
        return self.inner.select_due(due, n, order, index)  # (instances: opened in Task.from_db)

    def mark_leased(self, leases: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
        self.inner.mark_leased(leases, expires, holder, now)

    def lock_group(self, namespace: int, key: int) -> None:
        self.inner.lock_group(namespace, key)

    # -- outcomes: the result and the error text -----------------------------------------

    # (A completion's attempt has no error text: nothing of it to seal.)
    def complete_many(
        self, wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
    ) -> list[OutcomeRow]:
        return _opened(self.inner.complete_many(self._sealed_results(_keyed(wanted)), now, retention, kept, by))

    async def acomplete_many(
        self, conn: Any, wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
    ) -> list[OutcomeRow]:
        wanted = _keyed(wanted)
        if any(key == KEY_UNKNOWN and result for _, result, key in wanted.values()):
            known = await self.inner.akey_ids(conn, [i for i, (_, _, k) in wanted.items() if k == KEY_UNKNOWN])  # type: ignore[attr-defined]
            wanted = _with_keys(wanted, known)
        rows = await self.inner.acomplete_many(conn, self._sealed_results(wanted), now, retention, kept, by)  # type: ignore[attr-defined]
        return _opened(rows)

    def record_attempts(self, attempts: Sequence[Attempt], now: datetime, kept: int) -> None:
        # Each error text sealed as the task's last_error is, under the
        # attempt's key id (its task's), as an attempt's (sealing.ATTEMPT_ERROR).
        sealed = [
            replace(a, error=sealing.seal_text(a.key_id, a.error, sealing.ATTEMPT_ERROR, a.task_id)) for a in attempts
        ]
        self.inner.record_attempts(sealed, now, kept)

    def _sealed_results(self, wanted: Wanted) -> Wanted:
        unknown = [i for i, (_, result, key) in wanted.items() if key == KEY_UNKNOWN and result]
        if unknown:
            wanted = _with_keys(wanted, self.inner.key_ids(unknown))
        return {
            task_id: (lease, sealing.seal(None if key == KEY_UNKNOWN else key, result, _RESULT, task_id), key)
            for task_id, (lease, result, key) in wanted.items()
        }

    def lock_leased(self, task_id: str, lease_id: str) -> Task | None:
        return self.inner.lock_leased(task_id, lease_id)

    def lock_active(self, wanted: dict[str, str]) -> list[Task]:
        return self.inner.lock_active(wanted)

    def finish(self, row: Task, fields: Sequence[str]) -> None:
        with _sealed_error(row, "last_error" in fields):
            self.inner.finish(row, fields)

    def retry(self, row: Task) -> None:
        with _sealed_error(row, True):
            self.inner.retry(row)

    def release(self, ids: Sequence[str], now: datetime) -> None:
        self.inner.release(ids, now)

    def requeue(self, ids: Sequence[str], now: datetime) -> None:
        self.inner.requeue(ids, now)

    def extend(self, wanted: dict[str, str], expires: datetime) -> set[str]:
        return self.inner.extend(wanted, expires)

    def set_progress(self, task_id: str, lease_id: str, percent: int, message: str) -> bool:
        return self.inner.set_progress(task_id, lease_id, percent, message)

    # -- search: only plaintext payloads can match (the inner store requires key_id IS NULL) --

    def matching(self, rows: Any, payload: Sequence[tuple[tuple[str, ...], Any]], metadata: dict[str, str],
                 contains: str) -> Any:  # fmt: skip
        return self.inner.matching(rows, payload, metadata, contains)

    # -- sweeps and keys ------------------------------------------------------------------

    def purge(self, now: datetime, cutoff: datetime, limit: int) -> int:
        return self.inner.purge(now, cutoff, limit)

    # -- node death: no payload, result or error text passes -------------------------------

    def dead_nodes(self, alive: str) -> list[str]:
        return self.inner.dead_nodes(alive)

    def withdraw_offers_of(self, holder: str) -> int:
        return self.inner.withdraw_offers_of(holder)

    def leases_held_by(self, holder: str) -> list[tuple[str, str]]:
        return self.inner.leases_held_by(holder)

    def hand_over(self, task_id: str, lease_id: str, holder: str) -> bool:
        return self.inner.hand_over(task_id, lease_id, holder)

    async def ahold_liveness(self, conn: Any, namespace: int, key: int) -> bool:
        return await self.inner.ahold_liveness(conn, namespace, key)  # type: ignore[attr-defined,no-any-return]

    def key_ids(self, task_ids: Sequence[str]) -> dict[str, str | None]:
        return self.inner.key_ids(task_ids)

    async def akey_ids(self, conn: Any, task_ids: list[str]) -> dict[str, str | None]:
        return await self.inner.akey_ids(conn, task_ids)  # type: ignore[attr-defined,no-any-return]

    def key_counts(self) -> dict[str, dict[str | None, int]]:
        return self.inner.key_counts()

    def reseal_tasks(self, key_id: str, after: str, limit: int) -> Resealed:
        return self.inner.reseal_tasks(key_id, after, limit)

    def reseal_cron(self, key_id: str) -> Resealed:
        return self.inner.reseal_cron(key_id)


def _keyed(wanted: Any) -> Wanted:
    """*wanted* with a key id in every entry (one given as (lease id, result) has it unknown)."""
    return {i: entry if len(entry) == 3 else (entry[0], entry[1], KEY_UNKNOWN) for i, entry in wanted.items()}


def _with_keys(wanted: Wanted, known: dict[str, str | None]) -> Wanted:
    """*wanted* with the unknown key ids as read (a row that is gone keeps none: its lease is lost)."""
    return {
        i: (lease, result, known.get(i) if key == KEY_UNKNOWN else key) for i, (lease, result, key) in wanted.items()
    }


def _opened(rows: list[OutcomeRow]) -> list[OutcomeRow]:
    for row in rows:
        if row.key_id is not None and row.last_error:
            try:
                row.last_error = sealing.open_text(row.key_id, row.last_error, _ERROR, row.id)
            except KeyUnavailable:
                row.last_error = ""  # (shown in its event only; never as ciphertext)
    return rows


@contextmanager
def _sealed_rows(tasks: Sequence[Task]) -> Iterator[None]:
    """The tasks' payloads and error texts sealed for the statement, then
    their plaintext back (the caller answers and announces with them)."""
    kept = []
    try:
        for task in tasks:
            if task.key_id is not None:
                kept.append((task, task.payload, task.last_error))
                values = sealing.seal_task_values(
                    {"id": task.id, "key_id": task.key_id, "payload": task.payload, "last_error": task.last_error}
                )
                task.payload, task.last_error = values["payload"], values["last_error"]
        yield
    finally:
        for task, payload, error in kept:
            task.payload, task.last_error = payload, error


@contextmanager
def _sealed_error(row: Task, writes: bool) -> Iterator[None]:
    if not writes or row.key_id is None or not row.last_error:
        yield
        return
    plain = row.last_error
    row.last_error = sealing.seal_text(row.key_id, plain, _ERROR, row.id)
    try:
        yield
    finally:
        row.last_error = plain
