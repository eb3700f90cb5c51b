"""What ``Client.enqueue`` does per call on the producer's side, besides the
HTTP (docs/decisions.md, "The SDK's HTTP library"): the request body and the
answer are handled without work that could be done once, and the result is
the same as the straightforward code's."""

from __future__ import annotations

import json
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import FrozenInstanceError, fields
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from conveyor.sdk import client as sdk

ANSWER = {
    "id": "01M8Y9K3KAAQZPG7RSS5F28TG7",
    "queue": "single",
    "type": "noop",
    "state": "pending",
    "priority": 4,
    "content_type": "application/json",
    "payload": "e30=",
    "json": {},
    "metadata": {},
    "result": None,
    "max_retry": 25,
    "retried": 0,
    "attempt": 1,
    "last_error": "",
    "enqueued_at": "2026-12-03T15:50:26.154320Z",
    "started_at": None,
    "finished_at": "2026-12-03T16:50:26+01:00",
    "progress": 0,
}


def python_calls(call: Callable[[], Any]) -> set[str]:
    """The Python functions *call* runs (qualified names)."""
    seen: set[str] = set()

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code is not call.__code__:
            seen.add(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_from_json_builds_the_frozen_task_without_the_dataclass_init() -> None:
    info = sdk.TaskInfo.from_json(ANSWER)
    expected = sdk.TaskInfo(
        **{
            "id": ANSWER["id"],
            "queue": "single",
            "type": "noop",
            "state": "pending",
            "priority": 4,
            "attempt": 1,
            "retried": 0,
            "max_retry": 25,
            "last_error": "",
            "content_type": "application/json",
            "payload": b"{}",
            "metadata": {},
            "result": None,
            "progress": 0,
            "enqueued_at": datetime(2026, 12, 3, 15, 50, 26, 154320, tzinfo=UTC),
            "started_at": None,
            "finished_at": datetime(2026, 12, 3, 16, 50, 26, tzinfo=timezone(timedelta(hours=1))),
            "raw": ANSWER,
        }
    )
    assert info == expected
    assert repr(info) == repr(expected)
    assert list(vars(info)) == [f.name for f in fields(sdk.TaskInfo)]
    assert info.enqueued_at.tzinfo == UTC and info.json == {}
    with pytest.raises(FrozenInstanceError):
        info.state = "active"  # type: ignore[misc]
    # The dataclass's generated __init__ ("__create_fn__.<locals>.__init__") is not run.
    assert not [name for name in python_calls(lambda: sdk.TaskInfo.from_json(ANSWER)) if name.endswith("__init__")]


def test_from_json_fills_the_defaults_of_a_sparse_answer() -> None:
    info = sdk.TaskInfo.from_json({"id": "a", "queue": "q", "type": "t", "state": "pending"})
    assert (info.priority, info.attempt, info.retried, info.max_retry, info.progress) == (4, 1, 0, 0, 0)
    assert (info.last_error, info.content_type, info.payload, info.metadata) == ("", "", b"", {})
    assert info.enqueued_at is None and info.result is None


def test_the_json_body_is_encoded_without_building_an_encoder_per_call() -> None:
    body = {"type": "noop", "json": {"name": "Ada Lovelace", "é": [1, 2.5, None]}}
    encoded = sdk._json(body)
    assert encoded == json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    assert encoded == '{"type":"noop","json":{"name":"Ada Lovelace","é":[1,2.5,null]}}'.encode()
    with pytest.raises(ValueError):
        sdk._json({"json": float("nan")})
    assert "JSONEncoder.__init__" not in python_calls(lambda: sdk._json(body))


def test_task_request_leaves_out_the_options_not_given_and_converts_the_others() -> None:
    assert sdk.task_request("noop", {}, queue="single") == {"type": "noop", "queue": "single", "json": {}}
    assert python_calls(lambda: sdk.task_request("noop", {})) == {"task_request"}  # no _seconds, no _stamp
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    body = sdk.task_request(
        "t",
        b"\x00",
        id="x",
        priority=1,
        max_retry=2,
        process_in=timedelta(seconds=3),
        process_at=at,
        expires_in=4,
        expires_at=at,
        unique_key="k",
        unique_ttl=timedelta(minutes=1),
        unique=True,
        group="g",
        concurrency_key="c",
        depends_on=["a", {"id": "b"}],
        timeout=5.5,
        deadline=at,
        retention="7d",
        retry_policy={"backoff": "fixed"},
        metadata={"m": "v"},
    )
    # The keys in the order the body has always had them (the JSON's bytes are the same).
    assert list(body.items()) == [
        ("type", "t"),
        ("queue", "default"),
        ("payload", "AA=="),
        ("content_type", "application/octet-stream"),
        ("id", "x"),
        ("priority", 1),
        ("max_retry", 2),
        ("process_in", 3.0),
        ("process_at", "2030-01-02T03:04:05+00:00"),
        ("expires_in", 4),
        ("expires_at", "2030-01-02T03:04:05+00:00"),
        ("unique_key", "k"),
        ("unique_ttl", 60.0),
        ("group", "g"),
        ("concurrency_key", "c"),
        ("timeout", 5.5),
        ("deadline", "2030-01-02T03:04:05+00:00"),
        ("retention", "7d"),
        ("retry_policy", {"backoff": "fixed"}),
        ("metadata", {"m": "v"}),
        ("unique", True),
        ("depends_on", ["a", {"id": "b"}]),
    ]
    # Empty mappings are left out, as None is.
    assert "metadata" not in sdk.task_request("t", metadata={}) and "retry_policy" not in sdk.task_request(
        "t", retry_policy={}
    )


def test_a_constant_path_is_percent_encoded_once() -> None:
    path = "/api/v1/queues/odd name/pause"
    assert sdk._target(path, None) == "/api/v1/queues/odd%20name/pause"
    assert sdk._target(path, {"a": "b c"}) == "/api/v1/queues/odd%20name/pause?a=b+c"
    assert sdk._target("/api/v1/tasks?x=1", {"y": 2}) == "/api/v1/tasks?x=1&y=2"
    assert urllib.parse.quote.__qualname__ not in python_calls(lambda: sdk._target(path, None))
