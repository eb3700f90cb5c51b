"""The enqueue path's new-row record holds what Django's constructor would set,
and becomes a ``Task`` instance through the model's public ``from_db``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor.broker.offers import insert_params
from conveyor.broker.rows import NewTask, new_task, task_from_values, task_values
from conveyor.models import Task
from conveyor.store import cell, task_columns


def _values(task: Task | NewTask) -> dict:
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


def test_the_record_is_not_a_model_instance_and_its_model_is_a_stored_row():
    fields = {"queue": "q", "type": "t", "metadata": {"k": "v"}, "retried": 2}
    row = new_task("id1", fields)
    assert not isinstance(row, Task)
    assert row.attempt == 3

    task = row.model("default")
    assert isinstance(task, Task)
    assert _values(task) == _values(row)
    assert (task._state.adding, task._state.db) == (False, "default")  # as Model.from_db leaves it
    assert task.get_deferred_fields() == set()


def test_values_in_field_order_give_the_same_task():
    fields = {"queue": "q", "type": "t", "priority": 2}
    assert _values(task_from_values(task_values("id1", fields))) == _values(Task(id="id1", **fields))
    with pytest.raises(ValueError):
        task_from_values(task_values("id1", fields)[:-1])  # a value missing


def test_the_model_made_from_a_record_calls_init_receivers():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance.queue)

    post_init.connect(receiver, sender=Task, weak=False)
    try:
        new_task("id1", {"queue": "q"}).model("default")
    finally:
        post_init.disconnect(receiver, sender=Task)
    assert seen == ["q"]


@pytest.mark.parametrize("metadata", [{}, {"k": "v", "n": 1}], ids=["empty metadata", "metadata"])
@pytest.mark.parametrize("payload", [b"{}", memoryview(b"\x00bin")], ids=["bytes", "memoryview"])
def test_a_one_task_inserts_parameters_from_values_are_those_of_the_task_they_make(metadata, payload):
    fields = {"queue": "q", "type": "t", "payload": payload, "metadata": metadata, "due_at": datetime.now(UTC)}
    values = task_values("id1", fields)

    params = insert_params(values)
    task = task_from_values(values)
    expected = {attname: cell(getattr(task, attname), attname) for _, attname in task_columns()}

    assert params == expected
    assert [type(p) for p in params.values()] == [type(p) for p in expected.values()]  # (a memoryview equals its bytes)
