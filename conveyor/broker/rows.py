"""New task rows: a ``Task`` instance or its values, made from validated fields.

Enqueueing builds one model instance per stored task (the answer, the
events, the COPY row of a batch); Django's constructor is a large share of
what a batch costs the producer, so these make instances the way
unpickling does, from a plan of the model's fields worked out once.
"""

from __future__ import annotations

from typing import Any

from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from conveyor.models import Task


class _Plan:
    """How a new task's attributes are made, worked out once from the model.

    ``attnames``: every concrete field's attribute, in field order; ``defaults``:
    each one's default where it is a value; ``fresh``: those whose default
    is made anew for each task (``dict`` for metadata); ``direct``: whether an
    instance can be made as unpickling makes one (``__new__``, then its
    ``__dict__``), that is when no field's attribute is a data descriptor
    and nothing listens to ``pre_init``/``post_init`` for ``Task``.
    """

    def __init__(self) -> None:
        fields = Task._meta.concrete_fields
        self.attnames = [f.attname for f in fields]
        self.names = frozenset(self.attnames)
        self.defaults = {f.attname: f.get_default() for f in fields if not (f.has_default() and callable(f.default))}
        self.fresh = [(f.attname, f.default) for f in fields if f.has_default() and callable(f.default)]
        self.direct = not any(hasattr(type(getattr(Task, name, None)), "__set__") for name in self.attnames)

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


def new_task(task_id: str, fields: dict[str, Any]) -> Task:
    """``Task(id=..., **fields)``, several times faster.

    Django's keyword constructor looks every field up by name, asks for its
    default and sets each attribute in turn; here the attributes are filled
    in at once, as unpickling a model instance does. Unknown keys are
    refused as the keyword constructor refuses them. (With a data
    descriptor on a field, or a ``pre_init``/``post_init`` receiver for
    ``Task``, the constructor is called instead.)
    """
    return new_tasks([(task_id, fields)])[0]


def new_tasks(rows: list[tuple[str, dict[str, Any]]]) -> list[Task]:
    """``new_task`` of each (id, fields) pair."""
    plan = _plan()
    direct = _direct(plan)
    return [_made(plan, plan.values(task_id, fields), direct) for task_id, fields in rows]


def _direct(plan: _Plan) -> bool:
    """Whether instances can be made directly now (receivers come and go)."""
    return plan.direct and not (pre_init.has_listeners(Task) or post_init.has_listeners(Task))


def _made(plan: _Plan, values: dict[str, Any], direct: bool) -> Task:
    """A new ``Task`` whose attributes are *values* (every field's, by attname);
    *direct*: made as unpickling makes one, else by Django's constructor."""
    if not direct:
        return Task(*[values[name] for name in plan.attnames])
    task = Task.__new__(Task)
    task.__dict__ = values
    task._state = ModelState()  # a new row: adding, no database yet
    return task


def task_values(task_id: str, fields: dict[str, Any]) -> list[Any]:
    """The attribute values of a new task row, in field order (``Task(*values)``)."""
    plan = _plan()
    values = plan.values(task_id, fields)
    return [values[name] for name in plan.attnames]


def task_from_values(values: list[Any]) -> Task:
    """``Task(*values)`` (*values* in field order, as ``task_values`` gives them), as ``new_task`` makes one."""
    plan = _plan()
    return _made(plan, dict(zip(plan.attnames, values, strict=True)), _direct(plan))
