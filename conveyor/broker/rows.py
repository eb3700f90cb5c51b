"""New task rows: the values of a task about to be stored, as a plain record.

Enqueueing carries each new task through validation, placement (its state
from its dependencies), the INSERT or COPY, its events and the answer as a
``NewTask``: one attribute per column of the task table, no model instance.
Building a Django model per task would cost a batch more than its COPY;
like ``LeasedTask`` for the lease, a new row is never saved through the ORM.
Where a caller is promised a ``Task`` (``Broker.enqueue``, ``ItemResult.task``,
``enqueue_tx``) one is made from the record with ``Task.from_plaintext`` (``from_db``
without opening sealed values), the way a
row read back from the database is.
"""

from __future__ import annotations

from typing import Any

from conveyor.models import Task


class NewTask:
    """A new task row: every concrete field's attribute of ``Task``, set at once.

    Reads and writes like a ``Task`` instance (``task.state``,
    ``task.queue``...), and ``model(db)`` gives the instance itself.
    """

    # A new row is in plaintext: nothing of it failed to open (``Task.seal_error``).
    seal_error = ""

    def model(self, db: str) -> Task:
        """This row as a ``Task`` instance of database *db*, as if read back
        (its values are plaintext already: nothing to open)."""
        return Task.from_plaintext(db, [getattr(self, name) for name in _plan().attnames])

    @property
    def attempt(self) -> int:
        return self.retried + 1  # type: ignore[attr-defined, no-any-return]

    def __repr__(self) -> str:
        return f"<NewTask {getattr(self, 'id', '?')} {getattr(self, 'state', '?')}>"


class _Plan:
    """How a new row's attributes are made, worked out once from the model.

    ``attnames``: every concrete field's attribute, in field order; ``defaults``:
    each one's default where it is a value; ``fresh``: those whose default is
    made anew for each task (``dict`` for metadata).
    """

    def __init__(self) -> None:
        fields = Task._meta.concrete_fields
        self.attnames = [f.attname for f in fields]
        self.names = frozenset(self.attnames)
        self.defaults = {f.attname: f.get_default() for f in fields if not (f.has_default() and callable(f.default))}
        self.fresh = [(f.attname, f.default) for f in fields if f.has_default() and callable(f.default)]

    def values(self, task_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        if not self.names.issuperset(fields):
            raise TypeError(f"Task got unexpected fields: {sorted(set(fields) - self.names)}")
        values = self.defaults.copy()
        for attname, make in self.fresh:
            if attname not in fields:
                values[attname] = make()
        values.update(fields)
        values["id"] = task_id
        return values


_PLAN: _Plan | None = None


def _plan() -> _Plan:
    global _PLAN
    if _PLAN is None:
        _PLAN = _Plan()  # built aside, published at once: other threads may be here too
    return _PLAN


def _record(values: dict[str, Any]) -> NewTask:
    """The row whose attributes are *values* (a dict of its own, which becomes the row's)."""
    row = NewTask()
    row.__dict__ = values
    return row


def new_task(task_id: str, fields: dict[str, Any]) -> NewTask:
    """The new row of ``Task(id=task_id, **fields)``: every other field at its
    default. Unknown keys are refused as the model's constructor refuses them."""
    return _record(_plan().values(task_id, fields))


def new_tasks(rows: list[tuple[str, dict[str, Any]]]) -> list[NewTask]:
    """``new_task`` of each (id, fields) pair."""
    plan = _plan()
    return [_record(plan.values(task_id, fields)) for task_id, fields in rows]


def task_values(task_id: str, fields: dict[str, Any]) -> list[Any]:
    """The attribute values of a new task row, in field order."""
    plan = _plan()
    values = plan.values(task_id, fields)
    return [values[name] for name in plan.attnames]


def task_from_values(values: list[Any]) -> NewTask:
    """The row whose attribute values (in field order, as ``task_values`` gives them) are *values*."""
    return _record(dict(zip(_plan().attnames, values, strict=True)))
