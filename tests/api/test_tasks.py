"""Reading, listing, deleting and acting on tasks over REST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.models import Task
from tests.api.conftest import enqueue, lease, ok, refused, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)


def test_get_task_answers_the_stored_task(api, broker):
    task = enqueue(broker, queue="q", metadata={"k": "v"})
    body = ok(api.get(f"/api/v1/tasks/{task.id}"))
    assert (body["id"], body["queue"], body["type"], body["state"], body["metadata"]) == (
        task.id,
        "q",
        "api:test",
        "pending",
        {"k": "v"},
    )


def test_only_a_running_task_shows_a_lease_holder(api, broker):
    enqueue(broker, queue="q")
    batch = broker.lease("q", 1, holder="node-a")
    task = batch.tasks[0]
    assert ok(api.get(f"/api/v1/tasks/{task.id}"))["lease_holder"] == "node-a"
    broker.ack(task.id, task.lease_id)
    body = ok(api.get(f"/api/v1/tasks/{task.id}"))
    assert (body["state"], body["lease_holder"]) == ("completed", None)


def test_get_task_lists_its_attempts_oldest_first_with_worker_node_and_error(api, broker):
    from conveyor.store import Runner

    enqueue(broker, queue="q")
    first = broker.lease("q", 1, holder="node-a").tasks[0]
    worker = Runner("sess-1", {"host": "w1"}, "node-a")
    broker.settle_failure(
        first.id, first.lease_id, "Traceback (most recent call last):\nValueError: no", delay=0, by=worker
    )
    second = broker.lease("q", 1, holder="node-b").tasks[0]
    broker.ack(second.id, second.lease_id)

    body = ok(api.get(f"/api/v1/tasks/{first.id}"))

    assert [(a["number"], a["outcome"], a["worker"], a["node"], a["error"]) for a in body["attempts"]] == [
        (1, "retry", {"session": "sess-1", "labels": {"host": "w1"}}, "node-a",
         "Traceback (most recent call last):\nValueError: no"),
        (2, "completed", {"session": None, "labels": {}}, "node-b", ""),
    ]  # fmt: skip
    assert all(a["started_at"] and a["finished_at"] for a in body["attempts"])


def test_get_unknown_task_is_404_naming_it(api):
    body = refused(api.get("/api/v1/tasks/nope"), 404, "not_found")
    assert body["task_id"] == "nope"


def test_unknown_api_paths_answer_a_json_404(api):
    refused(api.get("/api/v1/nothing/here"), 404, "not_found")


# -- listing -----------------------------------------------------------------------------


def test_list_is_newest_first_and_filters_by_queue_state_type_and_search(api, broker):
    a = enqueue(broker, queue="qa", type="t1", unique_key="uk-1")
    b = enqueue(broker, queue="qa", type="t2")
    c = enqueue(broker, queue="qb", type="t1", process_in=3600)
    ids = lambda query: [t["id"] for t in ok(api.get(f"/api/v1/tasks{query}"))["tasks"]]  # noqa: E731
    assert ids("") == [c.id, b.id, a.id]
    assert ids("?queue=qa") == [b.id, a.id]
    assert ids("?state=scheduled") == [c.id]
    assert ids("?type=t1") == [c.id, a.id]
    assert ids("?search=uk-1") == [a.id]
    assert ids(f"?search={b.id}") == [b.id]
    assert ids("?queue=&state=") == [c.id, b.id, a.id]  # empty filters mean any


def test_list_searches_the_payload_and_the_metadata_with_where_and_contains(api, broker):
    a = enqueue(broker, payload=b'{"user_id": 42, "note": "red fox"}', metadata={"tenant": "acme"})
    b = enqueue(broker, payload=b'{"user_id": 7}', metadata={"tenant": "acme"})
    enqueue(broker, payload=b'{"user_id": "42"}')
    ids = lambda query: [t["id"] for t in ok(api.get("/api/v1/tasks", data=query))["tasks"]]  # noqa: E731
    assert ids({"where": "payload.user_id = 42"}) == [a.id]
    assert ids({"where": "metadata.tenant = acme"}) == [b.id, a.id]
    assert ids({"where": "metadata.tenant = acme and payload.user_id = 7"}) == [b.id]
    assert ids({"contains": "red fox"}) == [a.id]


def test_list_pages_with_the_next_page_token_until_a_short_page(api, broker):
    made = [enqueue(broker).id for _ in range(5)]
    seen, token, pages = [], None, 0
    while True:
        query = "?limit=2" + (f"&page_token={token}" if token else "")
        page = ok(api.get(f"/api/v1/tasks{query}"))
        seen += [t["id"] for t in page["tasks"]]
        pages += 1
        token = page["next_page_token"]
        if token is None:
            break
    assert seen == sorted(made, reverse=True)
    assert pages == 3


def test_a_full_last_page_still_has_a_token_and_the_next_page_is_empty(api, broker):
    for _ in range(2):
        enqueue(broker)
    first = ok(api.get("/api/v1/tasks?limit=2"))
    assert first["next_page_token"]
    last = ok(api.get(f"/api/v1/tasks?limit=2&page_token={first['next_page_token']}"))
    assert last == {"tasks": [], "next_page_token": None}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=1001", "limit"),
        ("limit=%C2%B2", "limit"),  # a superscript two is a digit to str.isdigit
        ("state=done", "state"),
        ("queue=-bad", "queue"),
        ("page_token=%25%25%25", "page_token"),
        ("page_token=AA", "page_token"),  # base64 of a NUL byte: not an id this server issued
        ("where=user_id%3D42", "where"),
        ("where=payload.a%3D1%20or%20payload.b%3D2", "where"),
        ("where=payload.a%3D%00", "where"),
        ("contains=%00", "contains"),
        ("contains=" + "x" * 201, "contains"),
    ],
)
def test_bad_list_parameters_are_400_naming_them(api, query, field):
    refused(api.get(f"/api/v1/tasks?{query}"), 400, "invalid_argument", field)


# -- delete ------------------------------------------------------------------------------


def test_delete_removes_the_task_and_answers_204(api, broker):
    task = enqueue(broker)
    response = api.delete(f"/api/v1/tasks/{task.id}")
    assert response.status_code == 204
    assert not Task.objects.filter(id=task.id).exists()


def test_delete_of_an_unknown_task_is_404(api):
    refused(api.delete("/api/v1/tasks/nope"), 404, "not_found")


def test_delete_of_an_active_task_is_409_and_keeps_it(api, broker):
    enqueue(broker)
    task = lease(broker)
    before = state_of_everything()
    body = refused(api.delete(f"/api/v1/tasks/{task.id}"), 409, "failed_precondition")
    assert body["state"] == "active"
    assert state_of_everything() == before


# -- single actions ----------------------------------------------------------------------


def test_cancel_run_archive_and_reschedule_answer_the_changed_task(api, broker):
    task = enqueue(broker)
    assert ok(api.post(f"/api/v1/tasks/{task.id}/archive"))["state"] == "archived"
    assert ok(api.post(f"/api/v1/tasks/{task.id}/run", {}))["state"] == "pending"
    later = ok(api.post(f"/api/v1/tasks/{task.id}/reschedule", {"process_in": "2h"}))
    assert later["state"] == "scheduled"
    assert datetime.fromisoformat(later["due_at"]) - datetime.now(UTC) > timedelta(minutes=119)
    at = "2001-01-01T00:00:00Z"
    assert ok(api.post(f"/api/v1/tasks/{task.id}/reschedule", {"process_at": at}))["state"] == "pending"
    canceled = ok(api.post(f"/api/v1/tasks/{task.id}/cancel"))
    assert (canceled["state"], canceled["last_error"]) == ("canceled", "canceled by operator")
    assert Task.objects.get(id=task.id).state == "canceled"


def test_cancel_of_an_active_task_asks_the_worker_and_keeps_it_active(api, broker):
    enqueue(broker)
    task = lease(broker)
    body = ok(api.post(f"/api/v1/tasks/{task.id}/cancel"))
    assert (body["state"], body["cancel_requested"]) == ("active", True)


@pytest.mark.parametrize("action", ["cancel", "run", "archive", "reschedule"])
def test_an_action_on_an_unknown_task_is_404(api, action):
    body = {"process_in": 5} if action == "reschedule" else None
    refused(api.post(f"/api/v1/tasks/nope/{action}", body), 404, "not_found")


@pytest.mark.parametrize(
    ("state_setup", "action"),
    [
        ("completed", "cancel"),
        ("completed", "archive"),
        ("completed", "run"),
        ("completed", "reschedule"),
        ("active", "run"),
        ("active", "archive"),
        ("active", "reschedule"),
        ("archived", "archive"),
    ],
)
def test_an_action_the_state_does_not_allow_is_409_and_changes_nothing(api, broker, state_setup, action):
    enqueue(broker)
    task = lease(broker)
    if state_setup == "completed":
        broker.ack(task.id, task.lease_id)
    elif state_setup == "archived":
        broker.archive_leased(task.id, task.lease_id, "boom")
    before = state_of_everything()
    body = {"process_in": 5} if action == "reschedule" else None
    error = refused(api.post(f"/api/v1/tasks/{task.id}/{action}", body), 409, "failed_precondition")
    assert (error["task_id"], error["state"]) == (task.id, state_setup)
    assert state_of_everything() == before


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("frob", None, "action"),
        ("delete", None, "action"),  # delete is DELETE /tasks/{id}
        ("reschedule", {}, "process_at"),
        ("reschedule", {"process_at": "2030-01-01T00:00:00Z", "process_in": 5}, "process_at"),
        ("reschedule", {"process_in": "later"}, "process_in"),
        ("reschedule", {"process_at": "tomorrow"}, "process_at"),
        ("reschedule", {"when": "now"}, "when"),
        ("cancel", {"reason": "x"}, "reason"),
        ("run", [1], ""),
    ],
)
def test_a_bad_action_request_is_400_naming_the_field_and_changes_nothing(api, broker, action, body, field):
    task = enqueue(broker)
    before = state_of_everything()
    refused(api.post(f"/api/v1/tasks/{task.id}/{action}", body), 400, "invalid_argument", field)
    assert state_of_everything() == before


# -- batch actions -----------------------------------------------------------------------


def test_batch_cancel_answers_per_id(api, broker):
    waiting = enqueue(broker)
    enqueue(broker, queue="busy")
    running = lease(broker, "busy")
    body = ok(api.post("/api/v1/tasks/actions/cancel", {"ids": [waiting.id, "nope", running.id]}))
    first, missing, active = body["results"]
    assert (first["id"], first["ok"], first["task"]["state"]) == (waiting.id, True, "canceled")
    assert (missing["id"], missing["ok"], missing["error"]["error"]) == ("nope", False, "not_found")
    assert (active["ok"], active["task"]["cancel_requested"]) == (True, True)


def test_batch_delete_run_archive_and_reschedule(api, broker):
    a, b = enqueue(broker), enqueue(broker)
    assert [
        r["task"]["state"] for r in ok(api.post("/api/v1/tasks/actions/archive", {"ids": [a.id, b.id]}))["results"]
    ] == ["archived"] * 2
    assert [r["task"]["state"] for r in ok(api.post("/api/v1/tasks/actions/run", {"ids": [a.id]}))["results"]] == [
        "pending"
    ]
    moved = ok(api.post("/api/v1/tasks/actions/reschedule", {"ids": [a.id], "process_in": "1h"}))["results"]
    assert moved[0]["task"]["state"] == "scheduled"
    wrong = ok(api.post("/api/v1/tasks/actions/reschedule", {"ids": [b.id], "process_in": "1h"}))["results"][0]
    assert (wrong["ok"], wrong["error"]["error"]) == (False, "failed_precondition")
    deleted = ok(api.post("/api/v1/tasks/actions/delete", {"ids": [a.id, b.id]}))["results"]
    assert [r["ok"] for r in deleted] == [True, True]
    assert "task" not in deleted[0]
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("cancel", {}, "ids"),
        ("cancel", {"ids": []}, "ids"),
        ("cancel", {"ids": "abc"}, "ids"),
        ("cancel", {"ids": [1]}, "ids[0]"),
        ("cancel", {"ids": ["a"] * 1001}, "ids"),
        ("cancel", {"ids": ["a"], "process_in": 5}, "process_in"),
        ("frob", {"ids": ["a"]}, "action"),
        ("reschedule", {"ids": ["a"]}, "process_at"),
        ("reschedule", {"ids": ["a"], "process_in": "x"}, "process_in"),
    ],
)
def test_a_bad_batch_action_is_400_naming_the_field_and_changes_nothing(api, broker, action, body, field):
    enqueue(broker, id="a")
    before = state_of_everything()
    refused(api.post(f"/api/v1/tasks/actions/{action}", body), 400, "invalid_argument", field)
    assert state_of_everything() == before
