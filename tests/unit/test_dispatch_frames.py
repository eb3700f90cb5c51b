"""Worker protocol v1 without a socket: message encoding, frame checks, server frames."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.dispatch import frames as f
from conveyor.models import Task
from conveyor.sdk import protocol as p

NOW = datetime(2026, 7, 9, 12, 0, tzinfo=UTC)


def make_task(**fields) -> Task:
    values = {
        "id": "01KX3CAWA7WMGN3R5EA7JJCFA0",
        "queue": "email",
        "type": "email:send",
        "state": "active",
        "payload": b'{"to":"a@b.c"}',
        "content_type": "application/json",
        "metadata": {},
        "priority": 4,
        "max_retry": 25,
        "retried": 0,
        "lease_id": "01KX3E7T2M4Q9RZC8B1JW5HD6P",
        "due_at": NOW,
        "enqueued_at": NOW - timedelta(seconds=3),
        "updated_at": NOW,
        "started_at": NOW,
    }
    values.update(fields)
    return Task(**values)


# -- messages --------------------------------------------------------------------------------


def test_one_frame_is_sent_as_an_object_and_several_as_an_array():
    one = {"type": "credit", "n": 1}

    assert json.loads(p.encode_frames([one])) == one
    assert json.loads(p.encode_frames([one, one])) == [one, one]


def test_decode_reads_back_what_encode_wrote():
    frames = [{"type": "result", "task_id": "a", "outcome": "success"}, {"type": "credit", "n": 2}]

    assert p.decode_frames(p.encode_frames(frames)) == frames
    assert p.decode_frames(p.encode_frames(frames[:1])) == frames[:1]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{nope", "not valid JSON"),
        ("", "not valid JSON"),
        ("[]", "empty array"),
        ("1", "JSON object"),
        ('[{"type": "credit"}, 2]', "JSON object"),
        ('{"n": 1}', "string 'type'"),
        ('{"type": null}', "string 'type'"),
        ('{"type": "progress", "percent": NaN}', "NaN"),
        ('{"type": "progress", "percent": -Infinity}', "Infinity"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_decode_refuses_malformed_messages_with_value_error(text, problem):
    with pytest.raises(ValueError, match=problem):
        p.decode_frames(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.2.3", (1, 2, 3)),
        ("0.1.0", (0, 1)),
        ("0.1", (0, 1)),
        ("1.10", (1, 10)),
        ("1.2.3-rc1", (1, 2, 3)),
        ("v2.0.1", (2, 0, 1)),
        ("", (0,)),
        ("junk", (0,)),
    ],
)
def test_version_tuple(text, expected):
    assert p.version_tuple(text) == expected


@pytest.mark.parametrize(
    ("older", "newer"),
    [("0.1.0", "0.2.0"), ("0.9", "0.10"), ("1.2.3-rc1", "1.2.4"), ("1", "1.0.1"), ("0.1.9", "1.0")],
)
def test_versions_compare_numerically(older, newer):
    assert p.version_tuple(older) < p.version_tuple(newer)


@pytest.mark.parametrize(("a", "b"), [("0.1", "0.1.0"), ("1", "1.0.0"), ("v1.2", "1.2"), ("1.2.3-rc1", "1.2.3")])
def test_versions_that_differ_only_in_spelling_compare_equal(a, b):
    assert p.version_tuple(a) == p.version_tuple(b)


def test_fatal_close_codes_are_the_refusals():
    assert set(p.FATAL_CLOSE_CODES) == {4400, 4401, 4403, 4406}


# -- hello -----------------------------------------------------------------------------------


def test_a_minimal_hello_is_filled_with_defaults():
    assert f.check_hello({"type": "hello", "queues": {"a": 3, "b": 1}, "concurrency": 4}) == {
        "protocol": 1,
        "queues": {"a": 3, "b": 1},
        "concurrency": 4,
        "prefetch": 0,
        "labels": {},
        "batch_types": [],
        "sdk_version": "",
        "min_server_version": "",
    }


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"queues": {}}, "'queues'"),
        ({"queues": None}, "'queues'"),
        ({"queues": {"a b": 1}}, "queue name 'a b'"),
        ({"queues": {"x" * 101: 1}}, "queue name"),
        ({"queues": {"a": 0}}, "weight of queue 'a'"),
        ({"queues": {"a": 1001}}, "weight"),
        ({"queues": {"a": 1.5}}, "weight"),
        ({"concurrency": 0}, "'concurrency'"),
        ({"concurrency": 10_001}, "'concurrency'"),
        ({"concurrency": True}, "'concurrency'"),
        ({"prefetch": -1}, "'prefetch'"),
        ({"prefetch": 1001}, "'prefetch'"),
        ({"prefetch": "2"}, "'prefetch'"),
        ({"prefetch": False}, "'prefetch'"),
        ({"labels": ["a"]}, "'labels'"),
        ({"labels": {"a": 1}}, "'labels'"),
        ({"batch_types": [""]}, "'batch_types'"),
        ({"sdk_version": 1}, "'sdk_version'"),
    ],
)
def test_a_bad_hello_names_the_field(fields, problem):
    hello = {"type": "hello", "queues": {"a": 1}, "concurrency": 1, **fields}

    with pytest.raises(f.FrameError, match=problem):
        f.check_hello(hello)


# -- worker frames -----------------------------------------------------------------------------


def test_result_frames():
    assert f.check_result({"type": "result", "task_id": "t", "outcome": "success", "result": {"n": 1}}) == (
        "t",
        "success",
        "",
        {"n": 1},
    )
    assert f.check_result({"type": "result", "task_id": "t", "outcome": "retry", "error": "boom"})[2] == "boom"


@pytest.mark.parametrize(
    "frame",
    [
        {"task_id": "", "outcome": "success"},
        {"task_id": 5, "outcome": "success"},
        {"task_id": "t", "outcome": "done"},
        {"task_id": "t", "outcome": "retry", "error": 5},
    ],
)
def test_bad_result_frames_are_refused(frame):
    with pytest.raises(f.FrameError):
        f.check_result({"type": "result", **frame})


def test_batch_result_frames():
    frame = {
        "type": "batch_result",
        "lease_id": "L",
        "results": [{"task_id": "a", "outcome": "success"}, {"task_id": "b", "outcome": "skip_retry", "error": "no"}],
    }

    assert f.check_batch_result(frame) == (
        "L",
        {"a": ("success", "", None, ""), "b": ("skip_retry", "no", None, "")},
    )


@pytest.mark.parametrize(
    "frame",
    [
        {"results": []},
        {"lease_id": "L", "results": {}},
        {"lease_id": "L", "results": ["a"]},
        {"lease_id": "L", "results": [{"task_id": "a", "outcome": "nope"}]},
    ],
)
def test_bad_batch_result_frames_are_refused(frame):
    with pytest.raises(f.FrameError):
        f.check_batch_result({"type": "batch_result", **frame})


def test_started_frames():
    assert f.check_task_ids({"type": "started", "task_ids": ["a"]}) == ["a"]
    with pytest.raises(f.FrameError, match="started: 'task_ids'"):
        f.check_task_ids({"type": "started", "task_ids": "a"})


def test_heartbeat_frames():
    assert f.check_task_ids({"type": "heartbeat", "task_ids": ["a", "b"]}) == ["a", "b"]
    assert f.check_task_ids({"type": "heartbeat"}) == []
    with pytest.raises(f.FrameError):
        f.check_task_ids({"type": "heartbeat", "task_ids": [1]})


def test_progress_frames():
    assert f.check_progress({"type": "progress", "task_id": "t", "percent": 50}) == ("t", 50.0, "")
    assert f.check_progress({"type": "progress", "task_id": "t", "percent": 12.5, "message": "m"}) == ("t", 12.5, "m")


@pytest.mark.parametrize("percent", [None, "50", True, float("nan"), float("inf"), float("-inf")])
def test_progress_needs_a_finite_number(percent):
    with pytest.raises(f.FrameError, match="finite number"):
        f.check_progress({"type": "progress", "task_id": "t", "percent": percent})


def test_credit_frames():
    assert f.check_credit({"type": "credit", "n": 3}) == (3, None)
    assert f.check_credit({"type": "credit", "n": 1, "queue": "a"}) == (1, "a")


@pytest.mark.parametrize("frame", [{"n": 0}, {"n": 10_001}, {"n": "1"}, {"n": True}, {"n": 1, "queue": 5}])
def test_bad_credit_frames_are_refused(frame):
    with pytest.raises(f.FrameError):
        f.check_credit({"type": "credit", **frame})


# -- server frames -----------------------------------------------------------------------------


def test_a_dispatch_frame_has_every_field():
    task = make_task(priority=7, retried=2, max_retry=5, metadata={"tenant": "acme"}, deadline=NOW + timedelta(hours=1))

    frame = f.dispatch_frame(task, "bulk")

    assert frame == {
        "type": "dispatch",
        "lease_id": "01KX3E7T2M4Q9RZC8B1JW5HD6P",
        "queue": "bulk",
        "task_id": "01KX3CAWA7WMGN3R5EA7JJCFA0",
        "task_type": "email:send",
        "payload": base64.b64encode(b'{"to":"a@b.c"}').decode(),
        "content_type": "application/json",
        "attempt": 3,
        "max_retry": 5,
        "priority": 7,
        "metadata": {"tenant": "acme"},
        "deadline": "2026-07-09T13:00:00Z",
        "enqueued_at": "2026-07-09T11:59:57Z",
    }


def test_an_unbounded_task_has_a_null_deadline():
    assert f.dispatch_frame(make_task(), "email")["deadline"] is None


def test_the_deadline_is_the_earlier_of_deadline_and_start_plus_timeout():
    assert f.effective_deadline(make_task(timeout=30.0)) == NOW + timedelta(seconds=30)
    assert f.effective_deadline(make_task(timeout=30.0, deadline=NOW + timedelta(seconds=10))) == NOW + timedelta(
        seconds=10
    )
    assert f.effective_deadline(make_task(timeout=30.0, started_at=None)) is None


def test_a_batch_dispatch_frame_shares_one_lease_and_lists_the_members():
    tasks = [make_task(id=f"t{i}", type="report:batch") for i in range(3)]

    frame = f.batch_dispatch_frame("reports", "daily", tasks)

    assert (frame["type"], frame["lease_id"], frame["queue"], frame["group"], frame["task_type"]) == (
        "batch_dispatch",
        "01KX3E7T2M4Q9RZC8B1JW5HD6P",
        "reports",
        "daily",
        "report:batch",
    )
    assert [m["task_id"] for m in frame["tasks"]] == ["t0", "t1", "t2"]
    assert "lease_id" not in frame["tasks"][0]


def test_server_frames_are_json():
    frame = f.dispatch_frame(make_task(metadata={"k": "v"}, deadline=NOW), "email")

    assert p.decode_frames(p.encode_frames([frame, f.error_frame("invalid_frame", "x")]))[1] == {
        "type": "error",
        "code": "invalid_frame",
        "message": "x",
    }


def test_the_sdk_task_carries_the_enqueue_time_the_node_sent():
    from conveyor.sdk.task import Task as SdkTask

    enqueued = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    task = Task(id="t1", queue="q", type="noop", payload=b"{}", enqueued_at=enqueued, lease_id="L", retried=0)
    frame = f.dispatch_frame(task, "q")

    assert SdkTask(frame, "q", "L", None).enqueued_at == enqueued
    assert SdkTask({**frame, "enqueued_at": None}, "q", "L", None).enqueued_at is None


def test_a_result_may_carry_a_traceback_beside_its_error():
    frame = {"type": "result", "task_id": "t", "outcome": "retry", "error": "boom", "traceback": "Traceback ..."}
    assert (f.check_result(frame)[2], f.traceback_of(frame)) == ("boom", "Traceback ...")
    assert f.traceback_of({"type": "result", "task_id": "t", "outcome": "retry"}) == ""
    with pytest.raises(f.FrameError, match="result: 'traceback' must be a string"):
        f.traceback_of({**frame, "traceback": ["not", "text"]})
