"""The SQLite store: the embedded database, through the ORM.

SQLite has no row locks: the broker's write transaction itself serializes
writers (``IMMEDIATE``, WAL). It has no one-statement lease and no offers:
every lease takes the broker's locked path, and a task is woken for.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTransform

from conveyor.models import Task, TaskDependency
from conveyor.states import State
from conveyor.store.base import NOBODY, OUTCOME_COLUMNS, Attempt, OutcomeRow, Runner, Wanted
from conveyor.store.orm import OrmTransitions

PURGE_CHUNK = 500  # ids per DELETE (SQLite's default limit is 32,766 parameters)


class SqliteStore(OrmTransitions):
    vendor = "sqlite"
    one_insert_in_autocommit = False
    has_offers = False
    has_liveness = False  # one embedded node: no other node to outlive it

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._insert: tuple[str, list[tuple[str, Any]]] | None = None

    # -- search: scans (SQLite has no index on JSON inside a blob) --------------------

    def matching(self, rows: Any, payload: Sequence[tuple[tuple[str, ...], Any]], metadata: dict[str, str],
                 contains: str) -> Any:  # fmt: skip
        for path, value in payload:
            rows = rows.filter(_payload_holds(path, value))
        for i, (key, value) in enumerate(metadata.items()):
            rows = rows.alias(**{f"metadata_{i}": KeyTransform(key, "metadata")}).filter(**{f"metadata_{i}": value})
        if contains:
            rows = rows.filter(
                RawSQL(f"{_KEYLESS} AND instr({_TEXT}, %s) > 0", [contains], output_field=BooleanField())
            )
        return rows

    # -- enqueue ---------------------------------------------------------------------

    def insert_tasks(self, tasks: Sequence[Task]) -> None:
        # The ORM compiles an INSERT (and adapts every value generically) on
        # each call; the statement and one adapter per column are built once.
        connection = connections[self.alias]
        if self._insert is None:
            qn = connection.ops.quote_name
            fields = Task._meta.concrete_fields
            sql = (
                f"INSERT INTO {qn(Task._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
                f"VALUES ({', '.join(['%s'] * len(fields))})"
            )
            self._insert = (sql, [(f.attname, _adapter(f, connection)) for f in fields])
        sql, adapters = self._insert
        rows = [[adapt(getattr(t, attname)) for attname, adapt in adapters] for t in tasks]
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)

    def insert_one(self, params: dict[str, Any], *, take_offer: bool) -> tuple[Any, ...] | None:
        raise NotImplementedError("SQLite has no offers; a task is inserted by insert_tasks")

    # -- lease -------------------------------------------------------------------------

    def lease(self, params: dict[str, Any], policy: str) -> list[tuple[Any, ...]] | None:
        return None  # no one-statement lease: the broker's locked path

    def select_due(self, due: Any, n: int, order: Sequence[str], index: str) -> list[Task]:
        # SQLite's planner, seeing "due_at <= now", may prefer the (queue,
        # due_at) index and then sort every due row on each lease. Name the
        # partial index whose order is the policy's: a lease then reads about
        # as many rows as it claims. (The state filter is a literal, see lookups.)
        ordered = due.order_by(*order)[:n]
        sql, params = ordered.query.sql_with_params()
        table = f'FROM "{Task._meta.db_table}"'
        if table not in sql:
            return list(ordered)
        sql = sql.replace(table, f'{table} INDEXED BY "{index}"', 1)
        return list(self.tasks.raw(sql, params))

    def mark_leased(self, leases: dict[str, str], expires: datetime, holder: str, now: datetime) -> None:
        # One UPDATE with a CASE over the ids (building it from ORM ``When``
        # objects costs more than the statement).
        conn = connections[self.alias]
        qn, adapt = conn.ops.quote_name, conn.ops.adapt_datetimefield_value
        whens = " ".join(["WHEN %s THEN %s"] * len(leases))
        sql = (
            f"UPDATE {qn(Task._meta.db_table)} SET {qn('state')} = %s, "
            f"{qn('lease_id')} = CASE {qn('id')} {whens} END, "
            f"{qn('lease_expires_at')} = %s, {qn('lease_holder')} = %s, {qn('started_at')} = %s, "
            f"{qn('updated_at')} = %s, {qn('progress')} = 0, {qn('progress_message')} = '' "
            f"WHERE {qn('id')} IN ({', '.join(['%s'] * len(leases))})"
        )
        params = [State.ACTIVE.value, *(v for pair in leases.items() for v in pair)]
        params += [adapt(expires), holder, adapt(now), adapt(now), *leases]
        with conn.cursor() as cursor:
            cursor.execute(sql, params)

    def lock_group(self, namespace: int, key: int) -> None:
        pass  # the write transaction serializes leasers already

    # -- outcomes ------------------------------------------------------------------------

    def complete_many(
        self, wanted: Wanted, now: datetime, retention: float, kept: int, by: dict[str, Runner]
    ) -> list[OutcomeRow]:
        # Lock the rows and match each task to its own lease. Matching by
        # "id IN (...) AND lease_id IN (...)" would let one item's lease
        # vouch for another. Plain rows, not model instances: this runs for
        # every batch of results.
        with transaction.atomic(using=self.alias):
            found = [
                values
                for values in self.tasks.select_for_update()
                .filter(id__in=list(wanted), state__is=State.ACTIVE)
                .order_by("id")
                .values_list(*OUTCOME_COLUMNS, "started_at", "lease_holder")
                if values[4] == wanted[values[0]][0]
            ]
            won = [OutcomeRow(*values[:-2]) for values in found]
            self.record_attempts([_completed(values, by.get(values[0], NOBODY)) for values in found], now, kept)
            by_retention: dict[float, list[str]] = defaultdict(list)
            for row in won:
                keep = retention if row.retention is None else row.retention
                result = wanted[row.id][1]
                if result is None:
                    by_retention[keep].append(row.id)
                else:
                    self._complete(self.tasks.filter(id=row.id), now, keep, result=result)
                row.state, row.finished_at = State.COMPLETED, now
            for keep, ids in by_retention.items():
                self._complete(self.tasks.filter(id__in=ids), now, keep)
        return won

    @staticmethod
    def _complete(scope: Any, now: datetime, retention: float, **extra: Any) -> int:
        return scope.filter(state=State.ACTIVE).update(
            state=State.COMPLETED,
            finished_at=now,
            updated_at=now,
            purge_at=now + timedelta(seconds=retention),
            lease_expires_at=None,
            progress=100,
            **extra,
        )

    # -- sweeps ----------------------------------------------------------------------------

    def dead_nodes(self, alive: str) -> list[str]:
        return []  # the embedded node is the only one

    def purge(self, now: datetime, cutoff: datetime, limit: int) -> int:
        from django.db.models import Q

        needed = TaskDependency.objects.using(self.alias).filter(resolution=TaskDependency.UNRESOLVED)
        expired = Q(state__is=State.COMPLETED, purge_at__lte=now) | Q(
            state__among=[State.ARCHIVED, State.CANCELED], finished_at__lte=cutoff
        )
        doomed = self.tasks.filter(expired).exclude(id__in=needed.values("depends_on_id"))
        ids = list(doomed.values_list("id", flat=True)[:limit])
        table, edges = Task._meta.db_table, TaskDependency._meta.db_table
        with connections[self.alias].cursor() as cursor:
            for start in range(0, len(ids), PURGE_CHUNK):
                chunk = ids[start : start + PURGE_CHUNK]
                marks = ", ".join(["%s"] * len(chunk))
                # Plain DELETEs: the ORM's cascading delete would first load
                # every row (payloads included). Edges are the only rows that
                # point at a task.
                cursor.execute(f'DELETE FROM "{edges}" WHERE task_id IN ({marks})', chunk)
                cursor.execute(f'DELETE FROM "{table}" WHERE id IN ({marks})', chunk)
        return len(ids)


def _completed(values: tuple[Any, ...], by: Runner) -> Attempt:
    """The attempt of a completed row (its outcome columns, then started_at and lease_holder)."""
    started, holder = values[-2:]
    runner = by if by.node else Runner(by.session, by.labels, holder)
    return Attempt(values[0], started, "completed", by=runner, key_id=values[OUTCOME_COLUMNS.index("key_id")])


_TABLE = f'"{Task._meta.db_table}"'
_TEXT = f'CAST({_TABLE}."payload" AS TEXT)'
_KEYLESS = f'{_TABLE}."key_id" IS NULL'
# JSON value -> the json_type() names it may have.
_JSON_TYPES = {str: ("text",), int: ("integer", "real"), float: ("integer", "real")}


def _payload_holds(path: tuple[str, ...], value: Any) -> RawSQL:
    """Whether the plaintext JSON payload has *value* at *path* (json_type and
    json_extract only inside the CASE: on a payload that is not JSON they
    would raise, and SQLite does not promise the order of AND's terms)."""
    where = "$" + "".join(f'."{key}"' for key in path)
    guard = f"{_KEYLESS} AND {_TABLE}.\"content_type\" = 'application/json' AND json_valid({_TEXT})"
    if value is None or isinstance(value, bool):
        test, params = f"json_type({_TEXT}, %s) = %s", [where, json.dumps(value)]
    else:
        kinds = ", ".join(f"'{k}'" for k in _JSON_TYPES[type(value)])
        test, params = f"json_type({_TEXT}, %s) IN ({kinds}) AND json_extract({_TEXT}, %s) = %s", [where, where, value]
    return RawSQL(f"CASE WHEN {guard} THEN {test} ELSE 0 END", params, output_field=BooleanField())


def _adapter(field: Any, connection: Any) -> Any:
    kind = field.get_internal_type()
    if kind == "DateTimeField":
        return connection.ops.adapt_datetimefield_value
    if kind == "JSONField":
        return lambda value: json.dumps(value)
    if kind == "BinaryField":
        return lambda value: None if value is None else bytes(value)
    return lambda value: value
