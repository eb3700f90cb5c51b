"""Fixtures for the Connect services: clients generated from our protos, raw HTTP, in process."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import api, broker, fresh_broker, read_only, tokens  # noqa: F401  (shared fixtures)
from tests.connect.clients import Rpc, post  # noqa: F401  (post: for the tests)


@pytest.fixture
def delivery(broker):  # noqa: F811  (the broker fixture above)
    """A task leased as a webhook delivery, and its lease token."""
    from conveyor.webhooks.tokens import mint
    from tests.api.conftest import enqueue, lease

    enqueue(broker, id="job-1", max_retry=3)
    task = lease(broker)
    return task, mint(task.id, task.lease_id)


@pytest.fixture(params=["json", "proto"])
def rpc(request: pytest.FixtureRequest) -> Rpc:
    """Each test twice: once in the JSON codec, once in binary protobuf."""
    return Rpc(codec=request.param)


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """A Connect unary error: the status of Connect's table and the body {code, message}."""
    assert response.status_code == status, f"{response.status_code}: {response.content[:300]!r}"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message"} and body["code"] == code and body["message"], body
    return body
