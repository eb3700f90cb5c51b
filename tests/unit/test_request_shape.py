"""The enqueue request is described once (conveyor/broker/request.py): the
parser, the OpenAPI schema and the CLI's flags all follow that definition,
and its limits are the ones the broker enforces."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from drf_spectacular.generators import SchemaGenerator

from conveyor.broker import parse, request
from conveyor.broker.validation import task_fields
from conveyor.exceptions import InvalidArgument

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def components() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]


@pytest.mark.parametrize(
    ("component", "fields"),
    [("EnqueueRequest", request.TASK), ("DependencyItem", request.DEPENDENCY), ("RetryPolicy", request.RETRY_POLICY)],
)
def test_the_openapi_schema_has_exactly_the_defined_fields(components, component, fields):
    schema = components[component]
    assert list(schema["properties"]) == [f.name for f in fields]
    assert schema.get("required", []) == [f.name for f in fields if f.required]
    for f in fields:
        assert f.help in schema["properties"][f.name]["description"]


def test_the_parser_takes_every_defined_field_and_refuses_any_other():
    accepted = {
        "type": "t", "queue": "q", "id": "i1", "json": {"a": 1}, "content_type": "application/json", "priority": 3,
        "max_retry": 2, "process_in": "5s", "expires_in": "1h", "unique_key": "k", "unique_ttl": 60, "unique": False,
        "group": None, "concurrency_key": "c", "depends_on": [{"task_id": "d1", "on_failure": "continue"}],
        "timeout": "30s", "deadline": "2026-02-01T00:00:00Z", "retention": 0, "metadata": {"m": "v"},
        "retry_policy": {"kind": "fixed", "base": "1s", "cap": "2s"}, "process_at": None, "expires_at": None,
        "payload": None,
    }  # fmt: skip
    assert set(accepted) == set(request.TASK_FIELDS)
    spec = parse.parse_task(accepted)
    assert (spec.type, spec.queue, spec.id, spec.priority, spec.process_in) == ("t", "q", "i1", 3, 5.0)
    assert spec.retry_policy is not None and (spec.retry_policy.kind, spec.retry_policy.cap) == ("fixed", 2.0)
    assert [(d.task_id, d.on_failure) for d in spec.depends_on] == [("d1", "continue")]

    with pytest.raises(InvalidArgument) as refused:
        parse.parse_task({"type": "t", "colour": "red"})
    assert refused.value.field == "colour"
    with pytest.raises(InvalidArgument) as nested:
        parse.parse_task({"type": "t", "retry_policy": {"kind": "fixed", "jitter": 1}})
    assert nested.value.field == "retry_policy.jitter"


@pytest.mark.parametrize("field", [f for f in request.TASK if f.kind == "text" and f.max_length], ids=lambda f: f.name)
def test_a_text_fields_max_length_is_the_one_the_broker_enforces(field):
    def fields_with(value: str) -> dict:
        return task_fields(parse.parse_task({"type": "t", field.name: value}), NOW)

    assert fields_with("x" * field.max_length)  # the longest the definition allows is accepted
    with pytest.raises(InvalidArgument) as refused:
        fields_with("x" * (field.max_length + 1))
    assert refused.value.field == field.name


@pytest.mark.parametrize("field", [f for f in request.TASK if f.kind == "integer"], ids=lambda f: f.name)
def test_an_integer_fields_range_is_the_one_the_broker_enforces(field):
    for value in (field.minimum, field.maximum):
        task_fields(parse.parse_task({"type": "t", field.name: value}), NOW)
    for value in (field.minimum - 1, field.maximum + 1):
        with pytest.raises(InvalidArgument) as refused:
            task_fields(parse.parse_task({"type": "t", field.name: value}), NOW)
        assert refused.value.field == field.name


def test_the_cli_flags_help_is_the_fields_help():
    import argparse

    from conveyor.cli import enqueue

    subparsers = argparse.ArgumentParser().add_subparsers()
    enqueue.register(subparsers)
    shown = " ".join(subparsers.choices["enqueue"].format_help().split())
    for name in ("queue", "priority", "max_retry", "process_in", "unique_key", "concurrency_key", "retention"):
        assert " ".join(request.TASK_FIELDS[name].help.split()) in shown
