"""POST /api/v1/tasks, /tasks/batch and /tasks/tx: what is stored, and what is refused."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.models import Task
from tests.api.conftest import enqueue, ok, refused, state_of_everything

pytestmark = pytest.mark.django_db(transaction=True)

SEED_BODY = {
    "queue": "email",
    "type": "email:send",
    "payload": "eyJ0byI6ImFAYi5jIn0=",
    "contentType": "application/json",
}


def test_enqueue_stores_the_task_and_answers_201_with_it(api):
    body = ok(api.post("/api/v1/tasks", {"type": "email:send", "queue": "email", "json": {"to": "a@b.c"}, "priority": 7,
                                         "metadata": {"tenant": "t1"}}), 201)  # fmt: skip
    stored = Task.objects.get(id=body["id"])
    assert (stored.type, stored.queue, stored.state, stored.priority) == ("email:send", "email", "pending", 7)
    assert bytes(stored.payload) == b'{"to":"a@b.c"}'
    assert body["json"] == {"to": "a@b.c"}
    assert body["content_type"] == "application/json"
    assert body["metadata"] == {"tenant": "t1"}
    assert (body["state"], body["attempt"], body["max_retry"]) == ("pending", 1, 25)


def test_enqueue_base64_payload_keeps_bytes_and_defaults_to_octet_stream(api):
    raw = bytes(range(256))
    body = ok(api.post("/api/v1/tasks", {"type": "blob", "payload": base64.b64encode(raw).decode()}), 201)
    assert base64.b64decode(body["payload"]) == raw
    assert body["content_type"] == "application/octet-stream"
    assert body["json"] is None
    assert bytes(Task.objects.get(id=body["id"]).payload) == raw


def test_enqueue_url_safe_unpadded_base64_is_accepted(api):
    body = ok(api.post("/api/v1/tasks", {"type": "blob", "payload": "-_8", "content_type": "x/y"}), 201)
    assert base64.b64decode(body["payload"]) == b"\xfb\xff"


def test_enqueue_with_a_delay_is_scheduled(api):
    body = ok(api.post("/api/v1/tasks", {"type": "later", "process_in": "1h"}), 201)
    assert body["state"] == "scheduled"
    due = datetime.fromisoformat(body["due_at"])
    assert timedelta(minutes=59) < due - datetime.now(UTC) <= timedelta(hours=1)


def test_re_enqueueing_an_id_answers_200_with_the_stored_task_unchanged(api):
    first = ok(api.post("/api/v1/tasks", {"id": "order-1", "type": "ship", "json": {"n": 1}}), 201)
    again = ok(api.post("/api/v1/tasks", {"id": "order-1", "type": "other", "json": {"n": 2}, "queue": "q2"}), 200)
    assert again == first
    assert Task.objects.count() == 1


def test_a_live_unique_key_makes_a_second_enqueue_409_and_stores_nothing(api, broker):
    holder = enqueue(broker, unique_key="invoice-7")
    before = state_of_everything()
    body = refused(api.post("/api/v1/tasks", {"type": "bill", "unique_key": "invoice-7"}), 409, "already_exists")
    assert body["unique_key"] == "invoice-7"
    assert holder.id in body["message"]
    assert state_of_everything() == before


BAD_TASKS = [
    pytest.param({"type": ""}, "type", id="type-empty"),
    pytest.param({"queue": "q"}, "type", id="type-missing"),
    pytest.param({"type": 5}, "type", id="type-not-string"),
    pytest.param({"type": "x", "bogus": 1}, "bogus", id="unknown-field"),
    pytest.param({"type": "x", "queue": "-bad"}, "queue", id="queue-pattern"),
    pytest.param({"type": "x", "queue": "a b"}, "queue", id="queue-space"),
    pytest.param({"type": "x", "queue": "q" * 101}, "queue", id="queue-too-long"),
    pytest.param({"type": "x", "queue": 5}, "queue", id="queue-not-string"),
    pytest.param({"type": "x", "id": "bad id!"}, "id", id="id-pattern"),
    pytest.param({"type": "x", "id": 5}, "id", id="id-not-string"),
    pytest.param({"type": "x", "process_in": "forever"}, "process_in", id="duration-text"),
    pytest.param({"type": "x", "process_in": -5}, "process_in", id="duration-negative"),
    pytest.param({"type": "x", "process_in": True}, "process_in", id="duration-bool"),
    pytest.param({"type": "x", "expires_in": "1e400"}, "expires_in", id="duration-infinite"),
    pytest.param({"type": "x", "timeout": "0s"}, "timeout", id="timeout-zero"),
    pytest.param({"type": "x", "process_at": "yesterday"}, "process_at", id="timestamp-text"),
    pytest.param({"type": "x", "process_at": "2030-01-01T00:00:00"}, "process_at", id="timestamp-no-zone"),
    pytest.param({"type": "x", "process_at": 1700000000}, "process_at", id="timestamp-number"),
    pytest.param({"type": "x", "process_at": "2030-01-01T00:00:00Z", "process_in": 5}, "process_at", id="delay-both"),
    pytest.param({"type": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at", id="expiry-past"),
    pytest.param({"type": "x", "deadline": "2001-01-01T00:00:00Z"}, "deadline", id="deadline-past"),
    pytest.param({"type": "x", "payload": "!!!"}, "payload", id="base64-bad"),
    pytest.param({"type": "x", "payload": "QUJD="}, "payload", id="base64-bad-padding"),
    pytest.param({"type": "x", "payload": 5}, "payload", id="base64-not-string"),
    pytest.param({"type": "x", "json": {}, "payload": "QUJD"}, "json", id="json-and-payload"),
    pytest.param({"type": "x", "content_type": 5}, "content_type", id="content-type-not-string"),
    pytest.param({"type": "x", "priority": 10}, "priority", id="priority-high"),
    pytest.param({"type": "x", "priority": "high"}, "priority", id="priority-text"),
    pytest.param({"type": "x", "max_retry": -1}, "max_retry", id="max-retry-negative"),
    pytest.param({"type": "x", "metadata": [1]}, "metadata", id="metadata-list"),
    pytest.param({"type": "x", "metadata": {"a": 1}}, "metadata.a", id="metadata-value"),
    pytest.param({"type": "x", "unique": "yes"}, "unique", id="unique-not-bool"),
    pytest.param({"type": "x", "unique_ttl": "1h"}, "unique_ttl", id="unique-ttl-without-key"),
    pytest.param({"type": "x", "unique_key": 5}, "unique_key", id="unique-key-not-string"),
    pytest.param({"type": "x", "group": "g", "process_in": "1m"}, "group", id="group-with-delay"),
    pytest.param({"type": "x", "group": "g", "concurrency_key": "k"}, "group", id="group-with-concurrency-key"),
    pytest.param({"type": "x", "depends_on": "t1"}, "depends_on", id="depends-not-list"),
    pytest.param({"type": "x", "depends_on": [5]}, "depends_on[0]", id="depends-item-type"),
    pytest.param({"type": "x", "depends_on": ["nope"]}, "depends_on[0].task_id", id="depends-unknown-task"),
    pytest.param({"type": "x", "depends_on": [{"task_id": "a", "bogus": 1}]}, "depends_on[0].bogus", id="depends-unknown-field"),
    pytest.param({"type": "x", "depends_on": [{"task_id": "a", "on_failure": "explode"}]}, "depends_on[0].on_failure", id="depends-policy"),
    pytest.param({"type": "x", "retry_policy": {"kind": "random"}}, "retry_policy.kind", id="retry-kind"),
    pytest.param({"type": "x", "retry_policy": {"base": "soon"}}, "retry_policy.base", id="retry-base"),
    pytest.param({"type": "x", "retry_policy": {"jitter": 1}}, "retry_policy.jitter", id="retry-unknown-field"),
    pytest.param({"type": "x", "retry_policy": [1]}, "retry_policy", id="retry-not-object"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "field"), BAD_TASKS)
def test_bad_task_is_refused_400_naming_the_field_and_changes_nothing(api, broker, body, field):
    enqueue(broker)  # something to leave untouched
    before = state_of_everything()
    refused(api.post("/api/v1/tasks", body), 400, "invalid_argument", field)
    assert state_of_everything() == before


def test_a_payload_over_one_mebibyte_is_refused(api):
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    refused(api.post("/api/v1/tasks", {"type": "x", "payload": big}), 400, "invalid_argument", "payload")
    assert Task.objects.count() == 0


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        pytest.param("{bad", "application/json", id="not-json"),
        pytest.param("[1, 2]", "application/json", id="array"),
        pytest.param('"text"', "application/json", id="string"),
        pytest.param("[" * 100_000 + "]" * 100_000, "application/json", id="nested-too-deep"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_400_with_an_empty_field(api, raw, content_type):
    refused(api.post("/api/v1/tasks", raw=raw, content_type=content_type), 400, "invalid_argument", "")
    assert Task.objects.count() == 0


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain"])
def test_a_body_that_is_not_json_is_415_and_stores_nothing(api, content_type):
    refused(api.post("/api/v1/tasks", raw="type=x", content_type=content_type), 415, "unsupported_media_type")
    assert Task.objects.count() == 0


def test_a_multipart_form_post_is_415(api):
    response = api.client.post("/api/v1/tasks", data={"type": "x"})  # what a cross-site HTML form sends
    refused(response, 415, "unsupported_media_type")
    assert Task.objects.count() == 0


def test_the_seed_connect_body_sent_to_rest_names_the_camel_case_field_and_suggests_the_rest_name(api):
    body = refused(api.post("/api/v1/tasks", SEED_BODY), 400, "invalid_argument", "contentType")
    assert "content_type" in body["message"]
    assert Task.objects.count() == 0


# -- batch -------------------------------------------------------------------------------


def test_batch_stores_valid_items_and_answers_each_refused_one_by_its_index(api, broker):
    holder = enqueue(broker, unique_key="k1")
    body = ok(
        api.post(
            "/api/v1/tasks/batch",
            {
                "tasks": [
                    {"queue": "q"},  # 0: refused while parsing (no type)
                    {"type": "ok-1", "queue": "q"},  # 1
                    {"type": "x", "queue": "-bad"},  # 2: refused by the broker
                    {"type": "x", "unique_key": "k1"},  # 3: duplicate of a live task
                    {"type": "x", "process_in": "soon"},  # 4: refused while parsing
                    {"type": "ok-2", "queue": "q"},  # 5
                ]
            },
        )
    )
    results = body["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4, 5]
    expected = {0: ("invalid_argument", "type"), 2: ("invalid_argument", "queue"), 3: ("already_exists", None),
                4: ("invalid_argument", "process_in")}  # fmt: skip
    for index, (code, field) in expected.items():
        error = results[index]["error"]
        assert (error["error"], error.get("field"), error["index"]) == (code, field, index), error
        assert error["message"].startswith(f"item {index}: "), error
        assert "task" not in results[index]
    assert holder.id in results[3]["error"]["message"]
    for index, task_type in ((1, "ok-1"), (5, "ok-2")):
        assert results[index]["created"] is True
        assert results[index]["task"]["type"] == task_type
        assert Task.objects.filter(id=results[index]["task"]["id"], state="pending").exists()
    assert Task.objects.count() == 3  # the holder and the two good items


def test_batch_with_a_known_id_reports_created_false_and_the_stored_task(api, broker):
    existing = enqueue(broker, id="known", queue="q1")
    body = ok(api.post("/api/v1/tasks/batch", {"tasks": [{"id": "known", "type": "api:test", "queue": "q2"},
                                                          {"id": "new", "type": "n"}, {"id": "new", "type": "again"}]}))  # fmt: skip
    first, second, repeat = body["results"]
    assert (first["created"], first["task"]["queue"], first["task"]["id"]) == (False, "q1", existing.id)
    assert second["created"] is True
    assert repeat["task"]["type"] == "n"  # the first occurrence of a repeated id wins
    assert Task.objects.count() == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"tasks": []}, "tasks", id="empty"),
        pytest.param({"tasks": {"type": "x"}}, "tasks", id="not-a-list"),
        pytest.param({}, "tasks", id="missing"),
        pytest.param({"tasks": [{"type": "x"}], "atomic": True}, "atomic", id="unknown-field"),
        pytest.param({"tasks": [{"type": "x"}] * 1001}, "tasks", id="too-many"),
        pytest.param({"tasks": [{"type": "x"}] * 1000 + [{"type": ""}]}, "tasks", id="too-many-with-an-invalid-item"),
    ],
)
@pytest.mark.parametrize("path", ["/api/v1/tasks/batch", "/api/v1/tasks/tx"])
def test_batch_and_tx_refuse_a_bad_task_list_as_a_whole(api, path, body, field):
    refused(api.post(path, body), 400, "invalid_argument", field)
    assert Task.objects.count() == 0


# -- tx ----------------------------------------------------------------------------------


def test_tx_stores_every_item_and_answers_201(api):
    body = ok(
        api.post(
            "/api/v1/tasks/tx",
            {"tasks": [{"type": "a"}, {"type": "b", "id": "b1"}, {"type": "c", "depends_on": ["b1"]}]},
        ),
        201,
    )
    assert [t["type"] for t in body["tasks"]] == ["a", "b", "c"]
    assert [t["state"] for t in body["tasks"]] == ["pending", "pending", "blocked"]
    assert Task.objects.count() == 3


@pytest.mark.parametrize(
    ("tasks", "index", "field"),
    [
        pytest.param([{"type": "a"}, {"type": "b"}, {"type": "c", "priority": "max"}], 2, "priority", id="parse"),
        pytest.param([{"type": "a"}, {"type": "b", "queue": "-x"}], 1, "queue", id="broker"),
        pytest.param(
            [{"type": "a"}, {"type": "b", "depends_on": ["missing"]}], 1, "depends_on[0].task_id", id="dependency"
        ),
    ],
)
def test_tx_with_an_invalid_item_stores_none_and_names_its_index(api, broker, tasks, index, field):
    enqueue(broker)
    before = state_of_everything()
    body = refused(api.post("/api/v1/tasks/tx", {"tasks": tasks}), 400, "invalid_argument", field)
    assert body["index"] == index
    assert body["message"].startswith(f"item {index}: ")
    assert state_of_everything() == before


def test_tx_with_two_items_sharing_a_unique_key_stores_none_and_names_the_second(api):
    body = refused(api.post("/api/v1/tasks/tx", {"tasks": [{"type": "a"}, {"type": "b", "unique_key": "k"},
                                                           {"type": "c", "unique_key": "k"}]}), 409, "already_exists")  # fmt: skip
    assert (body["index"], body["unique_key"]) == (2, "k")
    assert Task.objects.count() == 0


def test_tx_colliding_with_a_live_task_stores_none(api, broker):
    enqueue(broker, unique_key="k")
    before = state_of_everything()
    body = refused(
        api.post("/api/v1/tasks/tx", {"tasks": [{"type": "a"}, {"type": "b", "unique_key": "k"}]}),
        409,
        "already_exists",
    )
    assert body["index"] == 1
    assert state_of_everything() == before
