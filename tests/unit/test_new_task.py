"""The fast Task constructor of the enqueue path builds what Django's would."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor.broker.offers import insert_params
from conveyor.broker.rows import new_task, task_from_values, task_values
from conveyor.models import Task
from conveyor.store import cell, task_columns


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


def test_an_instance_made_directly_is_a_new_unsaved_row_like_the_constructors():
    fields = {"queue": "q", "type": "t", "metadata": {"k": "v"}}
    made, built = new_task("id1", fields), Task(id="id1", **fields)
    assert made.pk == "id1"
    assert (made._state.adding, made._state.db) == (True, None)
    assert set(vars(made)) == set(vars(built))
    assert made.get_deferred_fields() == set()


def test_values_in_field_order_give_the_same_task():
    fields = {"queue": "q", "type": "t", "priority": 2}
    assert _values(task_from_values(task_values("id1", fields))) == _values(Task(id="id1", **fields))
    with pytest.raises(ValueError):
        task_from_values(task_values("id1", fields)[:-1])  # a value missing


def test_a_pre_init_receiver_for_task_is_still_called():
    from django.db.models.signals import post_init, pre_init

    seen = []

    def receiver(sender, **kwargs):
        seen.append(sender)

    for signal in (pre_init, post_init):
        signal.connect(receiver, sender=Task, weak=False)
        try:
            task = new_task("id1", {"queue": "q"})
        finally:
            signal.disconnect(receiver, sender=Task)
        assert seen == [Task]
        assert task.queue == "q"
        seen.clear()


def test_a_field_behind_a_data_descriptor_is_set_through_the_constructor(monkeypatch):
    from conveyor.broker import rows

    class Upper:  # a descriptor that changes what is set, as some field types do
        def __get__(self, instance, owner):
            return self if instance is None else instance.__dict__["queue"]

        def __set__(self, instance, value):
            instance.__dict__["queue"] = value.upper()

    monkeypatch.setattr(Task, "queue", Upper(), raising=False)
    monkeypatch.setattr(rows, "_PLAN", None)  # worked out again, with the descriptor in place
    try:
        assert rows._plan().direct is False
        assert new_task("id1", {"queue": "q"}).queue == "Q"
    finally:
        monkeypatch.undo()
        rows._PLAN = None
    assert rows._plan().direct is True


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
