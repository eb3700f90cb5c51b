"""A queue-limited token learns nothing of other queues' tasks through its enqueues.

Re-sending an existing id answers with the stored task, and a dependency on
an existing task is taken where a missing one is refused. For a token
limited to q1, a task of q2 is neither shown (an id it holds is refused as
taken, 409) nor known (a dependency on it is refused word for word as a
missing one), on the REST views, the enqueue fast path and Connect; nothing
is stored.
"""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import Api, enqueue, ok, refused, state_of_everything
from tests.api.test_auth import setup  # noqa: F401  (a fixture, used by scoped)
from tests.api.test_scopes import LIMITED, scoped  # noqa: F401  (fixtures)
from tests.connect.clients import post

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = {"card": "4111-1111"}  # the q2 task's payload: must never reach the q1 token


@pytest.fixture
def foreign(scoped, broker):  # noqa: F811
    enqueue(broker, id="t2", queue="q2", payload=json.dumps(SECRET).encode())


def rest(path: str, body: dict) -> object:
    return Api(LIMITED).post(path, body)


def fast(path: str, body: dict) -> object:
    return post(path, json.dumps(body), authorization=f"Bearer {LIMITED}")


def connect(method: str, body: dict) -> object:
    return Api(LIMITED).connect("TaskService", method, body)


ONE = {"id": "t2", "type": "x", "queue": "q1"}
SENDS = [
    pytest.param(rest, "/api/v1/tasks", ONE, id="rest"),
    pytest.param(rest, "/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}, ONE]}, id="rest-batch"),
    pytest.param(rest, "/api/v1/tasks/tx", {"tasks": [{"type": "x", "queue": "q1"}, ONE]}, id="rest-tx"),
    pytest.param(fast, "/api/v1/tasks", ONE, id="fast-path"),
    pytest.param(fast, "/api/v1/tasks/batch", {"tasks": [ONE]}, id="fast-path-batch"),
]


@pytest.mark.parametrize(("send", "path", "body"), SENDS)
def test_re_sending_another_queues_task_id_is_refused_as_taken_and_shows_nothing_of_it(foreign, send, path, body):
    before = state_of_everything()

    response = send(path, body)

    answer = refused(response, 409, "already_exists")
    assert (
        "t2" in answer["message"] and "q2" not in response.content.decode() and "4111" not in response.content.decode()
    )
    assert state_of_everything() == before


@pytest.mark.parametrize(
    ("method", "body"),
    [("Enqueue", {"taskId": "t2", "type": "x", "queue": "q1"}),
     ("EnqueueBatch", {"tasks": [{"taskId": "t2", "type": "x", "queue": "q1"}]}),
     ("EnqueueTx", {"tasks": [{"type": "x", "queue": "q1"}, {"taskId": "t2", "type": "x", "queue": "q1"}]})],
)  # fmt: skip
def test_connect_re_sending_another_queues_task_id_is_refused_as_taken(foreign, method, body):
    before = state_of_everything()

    response = connect(method, body)

    assert response.status_code == 409 and response.json()["code"] == "already_exists", response.text
    assert "q2" not in response.text and "4111" not in response.text
    assert state_of_everything() == before


def test_re_sending_an_id_of_the_tokens_own_queue_still_answers_with_the_stored_task(foreign, broker):
    enqueue(broker, id="t1b", queue="q1")

    assert ok(rest("/api/v1/tasks", {"id": "t1b", "type": "x", "queue": "q1"}), 200)["id"] == "t1b"


DEPENDS = [
    pytest.param(rest, "/api/v1/tasks", lambda d: {"type": "x", "queue": "q1", "depends_on": [d]}, id="rest"),
    pytest.param(rest, "/api/v1/tasks/tx", lambda d: {"tasks": [{"type": "x", "queue": "q1", "depends_on": [d]}]},
                 id="rest-tx"),
    pytest.param(fast, "/api/v1/tasks", lambda d: {"type": "x", "queue": "q1", "depends_on": [{"task_id": d}]},
                 id="fast-path"),
]  # fmt: skip


@pytest.mark.parametrize(("send", "path", "body"), DEPENDS)
def test_a_dependency_on_another_queues_task_is_refused_as_a_missing_one(foreign, send, path, body):
    before = state_of_everything()

    hidden = refused(send(path, body("t2")), 400, "invalid_argument")
    missing = refused(send(path, body("t9")), 400, "invalid_argument")

    assert hidden["field"] == missing["field"] and hidden["message"].replace("t2", "t9") == missing["message"]
    assert state_of_everything() == before


def test_connect_a_dependency_on_another_queues_task_is_refused_as_a_missing_one(foreign):
    def body(task_id: str) -> dict:
        return {"type": "x", "queue": "q1", "dependsOn": [{"taskId": task_id}]}

    hidden, missing = connect("Enqueue", body("t2")), connect("Enqueue", body("t9"))

    assert hidden.status_code == missing.status_code == 400, (hidden.text, missing.text)
    assert hidden.json()["message"].replace("t2", "t9") == missing.json()["message"]
