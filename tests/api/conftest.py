"""Fixtures for the HTTP API tests: a JSON client, the process-wide broker, settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client, override_settings

from conveyor.broker import Broker, TaskSpec, get_broker, set_broker
from conveyor.models import CronEntry, Queue, Task, WebhookRegistration
from tests.broker.factories import all_snapshots

TOKEN = "api-test-token"


class Api:
    """Django's test client speaking JSON, with an optional bearer token."""

    def __init__(self, token: str | None = None) -> None:
        self.client = Client()
        self.token = token

    def call(self, method: str, path: str, body: Any = None, *, raw: str | bytes | None = None,
             content_type: str = "application/json", token: str | None = None, **headers: str) -> Any:  # fmt: skip
        data = raw if raw is not None else (json.dumps(body) if body is not None else "")
        token = token if token is not None else self.token
        if token:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return getattr(self.client, method.lower())(path, data=data, content_type=content_type, **headers)

    def get(self, path: str, **kwargs: Any) -> Any:
        token = kwargs.pop("token", None) or self.token
        if token:
            kwargs["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return self.client.get(path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("PUT", path, body, **kwargs)

    def delete(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("DELETE", path, body, **kwargs)

    def connect(self, service: str, method: str, body: Any = None) -> Any:
        """A Connect JSON call through the node's ASGI application (Connect is served in front of Django)."""
        from tests.connect.clients import post

        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        return post(f"/conveyor.v1.{service}/{method}", json.dumps(body if body is not None else {}), **headers)


def ok(response: Any, status: int = 200) -> Any:
    """The JSON body of *response*, which must have *status*."""
    assert response.status_code == status, f"{response.status_code}: {response.content[:500]!r}"
    return response.json() if response.content else None


def refused(response: Any, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    """A REST error: the status, the error code and (for 400) the field named."""
    assert response.status_code == status, f"{response.status_code}: {response.content[:500]!r}"
    body = response.json()
    assert body["error"] == code, body
    assert body["message"], body
    if field is not None:
        assert body["field"] == field, body
    return body


def connect_refused(response: Any, status: int, code: str) -> dict[str, Any]:
    """A Connect error: Connect's HTTP status and exactly {code, message}."""
    assert response.status_code == status, f"{response.status_code}: {response.content[:500]!r}"
    body = response.json()
    assert set(body) == {"code", "message"}, body
    assert body["code"] == code, body
    assert body["message"], body
    return body


def state_of_everything() -> dict[str, Any]:
    """Every stored row the API can change, to show a refused request changed nothing."""
    return {
        "tasks": all_snapshots(get_broker()),
        "queues": list(Queue.objects.order_by("name").values()),
        "cron": list(CronEntry.objects.order_by("id").values()),
        "webhooks": list(WebhookRegistration.objects.order_by("name").values()),
    }


@pytest.fixture(autouse=True)
def fresh_broker() -> Iterator[None]:
    # Views use the process-wide broker; never let one test's leak into the next.
    set_broker(None)
    yield
    set_broker(None)


@pytest.fixture
def broker() -> Broker:
    """The broker the views use (default database, system clock)."""
    return get_broker()


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def tokens() -> Iterator[None]:
    with override_settings(CONVEYOR={"API_TOKENS": [TOKEN, "second-token"]}):
        yield


@pytest.fixture
def read_only() -> Iterator[None]:
    with override_settings(CONVEYOR={"READ_ONLY": True}):
        yield


def enqueue(broker: Broker, type: str = "api:test", **fields: Any) -> Task:
    return broker.enqueue(TaskSpec(type=type, **fields))


def lease(broker: Broker, queue: str = "default") -> Task:
    batch = broker.lease(queue, 1)
    assert len(batch.tasks) == 1, batch
    return batch.tasks[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # schemathesis 4.32 names each generated item "test[METHOD /path]", but under
    # pytest 9 every item's node id comes out as the bare function name; give
    # each its own (so -k, --lf, reports and xdist tell the operations apart).
    for item in items:
        name, nodeid = item.name, item.nodeid
        if type(item).__name__ == "SchemathesisFunction" and name.endswith("]") and not nodeid.endswith("]"):
            label = name[name.index("[") + 1 : -1]
            item._id = item.parent.id.child(item.originalname).with_params(label)  # type: ignore[attr-defined]
