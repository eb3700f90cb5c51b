"""The fast Task constructor of the enqueue path builds what Django's would."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor.broker.enqueue import new_task
from conveyor.models import Task


def _values(task: Task) -> dict:
    return {f.attname: getattr(task, f.attname) for f in Task._meta.concrete_fields}


def test_same_values_as_the_keyword_constructor_given_fields_and_defaults():
    fields = {"queue": "q", "type": "t", "payload": b"{}", "priority": 7, "due_at": datetime(2026, 1, 1, tzinfo=UTC)}
    assert _values(new_task("id1", fields)) == _values(Task(id="id1", **fields))
    assert _values(new_task("id2", {})) == _values(Task(id="id2"))


def test_callable_defaults_give_each_task_its_own_value():
    mutable = [f.attname for f in Task._meta.concrete_fields if f.has_default() and callable(f.default)]
    assert mutable, "Task has a field with a callable default (metadata)"
    first, second = new_task("a", {}), new_task("b", {})
    for attname in mutable:
        assert getattr(first, attname) is not getattr(second, attname)


def test_unknown_fields_are_refused_like_the_keyword_constructor():
    with pytest.raises(TypeError):
        Task(id="x", bogus=1)
    with pytest.raises(TypeError):
        new_task("x", {"bogus": 1})
