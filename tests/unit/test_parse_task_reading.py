"""``parse_task`` reads a task's fields once per request item without calling
the reader of a field the item leaves out (conveyor/broker/parse.py,
``_read_task``). What it gives must be what reading every field by its kind
gives (``_read``): the same values, a fresh list where one is made anew,
and the same field named first when several are wrong. ``check_text`` scans
clean text once; text it refuses is named as before."""

from __future__ import annotations

import pytest

from conveyor.broker import parse
from conveyor.broker.validation import check_text
from conveyor.exceptions import InvalidArgument

ITEMS = [
    {"type": "noop"},
    {"type": "noop", "queue": "drain", "json": {}},
    {"type": "t", "queue": "", "id": "", "unique_key": "", "group": "", "concurrency_key": ""},
    {"type": "t", "priority": 0, "max_retry": 0, "unique": False, "retention": 0, "process_in": ""},
    {"type": "t", "queue": None, "depends_on": None, "retry_policy": None, "metadata": None, "unique": None},
    {"type": "t", "process_at": "2026-02-01T00:00:00Z", "timeout": "30s", "unique": True, "metadata": {"a": "b"}},
    {"type": "t", "depends_on": ["a1", {"task_id": "a2", "on_failure": "continue"}], "retry_policy": {"base": 1}},
]


def read_every_field(item: dict) -> dict:
    """The values as the parser read them before: every field's reader, absent ones read as null."""
    values = parse._read(parse._TASK_VALUES, item)
    values["queue"] = values["queue"] or "default"
    return values


@pytest.mark.parametrize("item", ITEMS)
def test_a_task_reads_as_every_field_read_by_its_kind(item):
    spec = parse.parse_task(item)
    assert {name: getattr(spec, name) for name in read_every_field(item)} == read_every_field(item)


def test_each_parsed_task_has_a_depends_on_list_of_its_own():
    first, second = parse.parse_task({"type": "t"}), parse.parse_task({"type": "t"})
    assert first.depends_on == [] and second.depends_on == []
    assert first.depends_on is not second.depends_on
    first.depends_on.append("x")  # type: ignore[attr-defined]
    assert parse.parse_task({"type": "t"}).depends_on == []


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"type": "t", "queue": 5, "process_at": "soon", "unique": "yes"}, "queue"),
        ({"type": "t", "process_at": "soon", "unique": "yes"}, "process_at"),
        ({"type": "t", "unique": "yes", "depends_on": "a1"}, "unique"),
        ({"type": "t", "depends_on": [3], "retry_policy": 1}, "depends_on[0]"),
        ({"type": "t", "retry_policy": {"cap": "x"}, "id": 7}, "id"),
    ],
)
def test_of_several_wrong_fields_the_first_in_the_requests_order_is_named(item, field):
    with pytest.raises(InvalidArgument) as refused:
        parse.parse_task(item)
    assert refused.value.field == field
    with pytest.raises(InvalidArgument) as before:
        read_every_field(item)
    assert before.value.field == field


def test_an_unknown_field_is_named_with_its_hint():
    with pytest.raises(InvalidArgument) as refused:
        parse.parse_task({"type": "t", "maxRetry": 3})
    assert (refused.value.field, refused.value.reason) == ("maxRetry", "is not a known field (did you mean max_retry?)")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a\x01b", "must not contain control characters"),
        ("a\x00b", "must not contain control characters"),
        ("a\ud800b", "must not contain lone surrogates"),
        ("a\ud800b\x1f", "must not contain control characters"),  # (control characters are named first)
    ],
)
def test_text_check_names_what_it_refuses(value, reason):
    with pytest.raises(InvalidArgument) as refused:
        check_text(value, "type", 200)
    assert (refused.value.field, refused.value.reason) == ("type", reason)


def test_clean_text_passes_the_text_check_unchanged():
    for value in ("noop", "é ü 日本", "tab-free text with spaces", "\x7f"):
        assert check_text(value, "type", 200) is value
