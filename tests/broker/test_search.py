"""Search inside tasks: ``where`` conditions on the payload and the metadata, ``contains``; both stores."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from conveyor.exceptions import InvalidArgument
from tests.broker.factories import enqueue

K1 = "k1:" + "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="


def task(broker, payload=None, *, metadata=None, raw=None, content_type="application/json", queue="default"):
    body = raw if raw is not None else json.dumps(payload).encode()
    return enqueue(broker, payload=body, metadata=metadata, content_type=content_type, queue=queue).id


def found(broker, **filters):
    return {t.id for t in broker.list_tasks(limit=1000, **filters).tasks}


def test_a_payload_path_finds_exactly_the_tasks_holding_that_value(broker):
    hit = task(broker, {"user_id": 42, "name": "ada"})
    task(broker, {"user_id": 43})
    task(broker, {"user_id": "42"})  # a string is not the number
    task(broker, {"other": {"user_id": 42}})  # another path

    assert found(broker, where="payload.user_id = 42") == {hit}
    assert found(broker, where='payload.user_id="42"') != {hit}


def test_a_nested_path_and_several_conditions_must_all_hold(broker):
    both = task(broker, {"order": {"id": 7, "state": "paid"}, "vip": True})
    task(broker, {"order": {"id": 7, "state": "open"}, "vip": True})
    task(broker, {"order": {"id": 7, "state": "paid"}, "vip": False})

    assert found(broker, where="payload.order.id = 7 and payload.order.state = paid and payload.vip = true") == {both}


def test_strings_numbers_booleans_and_null_match_by_json_type(broker):
    s = task(broker, {"v": "yes"})
    n = task(broker, {"v": 1})
    t = task(broker, {"v": True})
    z = task(broker, {"v": None})

    assert found(broker, where="payload.v = yes") == {s}
    assert found(broker, where='payload.v = "yes"') == {s}
    assert found(broker, where="payload.v = 1") == {n}
    assert found(broker, where="payload.v = 1.0") == {n}
    assert found(broker, where="payload.v = true") == {t}
    assert found(broker, where="payload.v = null") == {z}


def test_a_metadata_key_and_value_find_their_tasks(broker):
    acme = task(broker, {}, metadata={"tenant": "acme", "n": "42"})
    task(broker, {}, metadata={"tenant": "globex"})
    task(broker, {})

    assert found(broker, where="metadata.tenant = acme") == {acme}
    assert found(broker, where="metadata.n = 42") == {acme}  # metadata values are strings
    assert found(broker, where="metadata.tenant = acme and payload.x = 1") == set()


def test_payloads_that_are_not_plain_json_never_match_nor_fail_the_search(broker):
    hit = task(broker, {"k": 1})
    task(broker, raw=b"\xff\xfe not utf-8")
    task(broker, raw=b"{not json")
    task(broker, raw=b'{"k": 1}', content_type="application/octet-stream")

    assert found(broker, where="payload.k = 1") == {hit}


def test_a_payload_sealed_at_rest_is_not_searchable_but_its_metadata_is(broker):
    with override_settings(CONVEYOR={"ENCRYPTION_KEYS": K1}):
        sealed = task(broker, {"k": 1}, metadata={"tenant": "acme"})
        assert found(broker, where="payload.k = 1") == set()
        assert found(broker, contains='"k"') == set()
        assert found(broker, where="metadata.tenant = acme") == {sealed}


def test_contains_finds_a_substring_of_the_payload_text(broker):
    hit = task(broker, {"note": "the quick brown fox"})
    task(broker, {"note": "lazy dog"})
    task(broker, raw=b"\xff quick")

    assert found(broker, contains="quick brown") == {hit}
    assert found(broker, contains="100%") == set()  # LIKE's wildcards are plain characters


def test_search_combines_with_the_other_filters_and_pages(broker):
    ids = sorted(task(broker, {"k": 1}, queue="q1") for _ in range(5))
    task(broker, {"k": 1}, queue="q2")

    first = broker.list_tasks(queue="q1", where="payload.k = 1", limit=3)
    rest = broker.list_tasks(queue="q1", where="payload.k = 1", limit=3, page_token=first.next_page_token)

    assert [t.id for t in first.tasks + rest.tasks] == ids[::-1]


@pytest.mark.parametrize(
    "where, says",
    [
        ("user_id = 42", "expected payload.<path>"),
        ("payload.user_id 42", "expected payload.<path>"),
        ("payload.user_id =", "needs a value"),
        ("payload.a = 1 or payload.b = 2", "expected 'and'"),
        ("payload.a = [1]", "a value is a string"),
        ("metadata.a.b = 1", "one level deep"),
        ("payload.a = 1 and " * 9 + "payload.a = 1", "at most 8 conditions"),
        ("payload.a = \x00", "NUL"),
    ],
)
def test_a_bad_where_is_refused_naming_the_parameter(broker, where, says):
    with pytest.raises(InvalidArgument) as caught:
        broker.list_tasks(where=where)

    assert caught.value.field == "where"
    assert says in caught.value.message
