"""A queue-limited token learns nothing of another queue's task through a unique key.

A unique key is held across queues, so an enqueue by a token limited to q1
whose key a task of q2 holds is refused (409 already_exists) like any other,
but the answer names no task: not its id, queue, payload, result or state,
on the REST views, the enqueue fast path and Connect. Nothing is stored.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from conveyor.models import Task
from tests.api.conftest import enqueue, ok, state_of_everything
from tests.api.test_auth import setup  # noqa: F401  (a fixture, used by scoped)
from tests.api.test_scopes import scoped  # noqa: F401  (a fixture)
from tests.api.test_scopes_foreign import SECRET, connect, fast, rest

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "invoice-42"
HIDDEN = ("t2", "t3", "q2", "4111", "pending", "active")  # what the answer must not carry of the q2 task


@pytest.fixture
def holder(scoped, broker):  # noqa: F811
    enqueue(broker, id="t2", queue="q2", unique_key=KEY, payload=json.dumps(SECRET).encode())
    enqueue(broker, "x", id="t3", queue="q2", unique=True, payload=json.dumps(SECRET, separators=(",", ":")).encode())


def shows_nothing(text: str) -> None:
    assert not [word for word in HIDDEN if word in text], text


ONE = {"type": "x", "queue": "q1", "unique_key": KEY}
BY_CONTENT = {"type": "x", "queue": "q1", "json": SECRET, "unique": True}  # the key of its type and payload
SENDS = [
    pytest.param(rest, "/api/v1/tasks", ONE, id="rest"),
    pytest.param(rest, "/api/v1/tasks", BY_CONTENT, id="rest-unique-by-content"),
    pytest.param(rest, "/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}, ONE]}, id="rest-batch"),
    pytest.param(rest, "/api/v1/tasks/tx", {"tasks": [{"type": "x", "queue": "q1"}, ONE]}, id="rest-tx"),
    pytest.param(fast, "/api/v1/tasks", ONE, id="fast-path"),
    pytest.param(fast, "/api/v1/tasks", BY_CONTENT, id="fast-path-unique-by-content"),
    pytest.param(fast, "/api/v1/tasks/batch", {"tasks": [{"type": "x", "queue": "q1"}, ONE]}, id="fast-path-batch"),
]


@pytest.mark.parametrize(("send", "path", "body"), SENDS)
def test_a_unique_key_held_in_another_queue_is_refused_without_naming_its_task(holder, send, path, body):
    before = state_of_everything()

    response = send(path, body)

    assert response.status_code == 409 and response.json()["error"] == "already_exists", response.content
    assert ("sha256:" if "unique" in json.dumps(body) and KEY not in json.dumps(body) else KEY) in response.json()[
        "message"
    ]
    shows_nothing(response.content.decode())
    assert state_of_everything() == before


@pytest.mark.parametrize(
    ("method", "body"),
    [("Enqueue", {"type": "x", "queue": "q1", "uniqueKey": KEY}),
     ("EnqueueBatch", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x", "queue": "q1", "uniqueKey": KEY}]}),
     ("EnqueueTx", {"tasks": [{"type": "x", "queue": "q1"}, {"type": "x", "queue": "q1", "uniqueKey": KEY}]})],
)  # fmt: skip
def test_connect_a_unique_key_held_in_another_queue_is_refused_naming_no_task(holder, method, body):
    before = state_of_everything()

    response = connect(method, body)

    assert response.status_code == 409 and response.json()["code"] == "already_exists", response.text
    assert KEY in response.json()["message"]
    shows_nothing(response.text)
    assert state_of_everything() == before


def test_a_unique_key_held_in_the_tokens_own_queue_still_names_its_holder(scoped, broker):  # noqa: F811
    enqueue(broker, id="t1u", queue="q1", unique_key=KEY)

    response = rest("/api/v1/tasks", ONE)

    assert response.status_code == 409 and "t1u" in response.json()["message"], response.content


def test_a_lapsed_claim_in_another_queue_does_not_refuse_the_key(scoped, broker):  # noqa: F811
    enqueue(broker, id="t2", queue="q2", unique_key=KEY, unique_ttl=60)
    Task.objects.filter(id="t2").update(unique_until=broker.now() - timedelta(seconds=1))

    assert ok(rest("/api/v1/tasks", ONE), 201)["unique_key"] == KEY
