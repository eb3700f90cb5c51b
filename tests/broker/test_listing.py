"""ListTasks: newest first by id, filters, limits and page tokens."""

from __future__ import annotations

import pytest
from django.test import override_settings

from conveyor.exceptions import InvalidArgument
from conveyor.states import State
from tests.broker.factories import enqueue, lease_one


def _ids_newest_first(tasks):
    return sorted((t.id for t in tasks), reverse=True)


def test_list_returns_tasks_newest_first_by_id(broker, clock):
    tasks = []
    for _ in range(5):
        tasks.append(enqueue(broker))
        clock.advance(1)

    page = broker.list_tasks()

    assert [t.id for t in page.tasks] == _ids_newest_first(tasks) == [t.id for t in reversed(tasks)]
    assert page.next_page_token is None


def test_list_defaults_to_pages_of_50(broker):
    for _ in range(51):
        enqueue(broker)

    page = broker.list_tasks()

    assert len(page.tasks) == 50
    assert page.next_page_token


@override_settings(CONVEYOR={"LIST_PAGE_DEFAULT": 3})
def test_list_default_page_size_follows_the_setting(broker):
    for _ in range(5):
        enqueue(broker)

    assert len(broker.list_tasks().tasks) == 3


def test_next_page_token_is_set_only_when_the_page_is_full(broker):
    for _ in range(4):
        enqueue(broker)

    full = broker.list_tasks(limit=4)
    partial = broker.list_tasks(limit=5)

    assert full.next_page_token is not None
    assert partial.next_page_token is None
    after_full = broker.list_tasks(limit=4, page_token=full.next_page_token)
    assert (after_full.tasks, after_full.next_page_token) == ([], None)


def test_paging_visits_every_task_once_in_order(broker):
    tasks = [enqueue(broker) for _ in range(7)]
    seen, token = [], None

    while True:
        page = broker.list_tasks(limit=3, page_token=token)
        seen.extend(t.id for t in page.tasks)
        token = page.next_page_token
        if token is None:
            break

    assert seen == _ids_newest_first(tasks)


def test_list_filters_by_queue_and_state(broker):
    a1 = enqueue(broker, queue="a")
    a2 = enqueue(broker, queue="a")
    b1 = enqueue(broker, queue="b")
    leased = lease_one(broker, "a")

    assert {t.id for t in broker.list_tasks(queue="a").tasks} == {a1.id, a2.id}
    assert [t.id for t in broker.list_tasks(state="active").tasks] == [leased.id]
    assert [t.id for t in broker.list_tasks(queue="a", state="pending").tasks] == [
        a2.id if leased.id == a1.id else a1.id
    ]
    assert [t.id for t in broker.list_tasks(queue="b", state=State.PENDING).tasks] == [b1.id]


def test_list_accepts_limits_1_to_1000_and_rejects_others(broker):
    tasks = [enqueue(broker) for _ in range(2)]

    assert [t.id for t in broker.list_tasks(limit=1).tasks] == [max(t.id for t in tasks)]
    assert len(broker.list_tasks(limit=1000).tasks) == 2
    for limit in (-1, 1001, 2.5, "10", True):
        with pytest.raises(InvalidArgument) as err:
            broker.list_tasks(limit=limit)
        assert err.value.field == "limit", limit


def test_list_rejects_an_unknown_state(broker):
    with pytest.raises(InvalidArgument) as err:
        broker.list_tasks(state="finished")

    assert err.value.field == "state"


def test_list_rejects_a_page_token_it_did_not_issue(broker):
    enqueue(broker)

    for token in ("garbage", "!!!", "a", "AAAA", "____", "%00"):
        with pytest.raises(InvalidArgument) as err:
            broker.list_tasks(page_token=token)
        assert err.value.field == "page_token", token
