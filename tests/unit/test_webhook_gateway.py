"""Pure helpers of the webhook gateway: the delivery envelope and reading answers."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from conveyor.models import Task
from conveyor.sdk import protocol as p
from conveyor.webhooks import tokens
from conveyor.webhooks.gateway import EXECUTE, MAX_ERROR, TransportFailure, read_answer, request_body

LEASE = "01KX3E7T2M4Q9RZC8B1JW5HD6P"
TASK_ID = "01KX3CAWA7WMGN3R5EA7JJCFA0"
NOW = datetime(2026, 7, 9, 12, 0, tzinfo=UTC)


def make_task(**fields) -> Task:
    values = {
        "id": TASK_ID,
        "queue": "email",
        "type": "email:send",
        "state": "active",
        "payload": b'{"to":"a@b.c"}',
        "content_type": "application/json",
        "metadata": {},
        "max_retry": 25,
        "retried": 0,
        "lease_id": LEASE,
        "due_at": NOW,
        "enqueued_at": NOW,
        "updated_at": NOW,
        "started_at": NOW,
    }
    values.update(fields)
    return Task(**values)


# -- request_body ------------------------------------------------------------------------


def test_the_envelope_is_a_json_rpc_execute_call_whose_id_is_the_lease_id():
    body = request_body(make_task(), "email")

    assert body["jsonrpc"] == "2.0"
    assert body["method"] == EXECUTE == "conveyor.task.execute"
    assert body["id"] == LEASE


def test_params_carry_the_task_fields_in_camel_case():
    params = request_body(make_task(retried=2, max_retry=5, content_type="text/plain"), "email")["params"]

    assert params["taskId"] == TASK_ID
    assert params["queue"] == "email"
    assert params["type"] == "email:send"
    assert params["attempt"] == 3
    assert params["maxRetry"] == 5
    assert params["contentType"] == "text/plain"


def test_the_first_delivery_is_attempt_one():
    assert request_body(make_task(retried=0), "email")["params"]["attempt"] == 1


def test_params_queue_is_the_queue_the_task_was_leased_from():
    assert request_body(make_task(queue="email"), "bulk")["params"]["queue"] == "bulk"


def test_the_payload_is_base64_of_the_stored_bytes_exactly():
    raw = bytes(range(256))

    params = request_body(make_task(payload=memoryview(raw), content_type="application/octet-stream"), "email")[
        "params"
    ]

    assert base64.b64decode(params["payload"]) == raw


def test_an_empty_payload_is_an_empty_string():
    assert request_body(make_task(payload=b""), "email")["params"]["payload"] == ""


def test_deadline_is_omitted_when_the_task_is_unbounded():
    assert "deadline" not in request_body(make_task(), "email")["params"]


def test_deadline_is_the_tasks_deadline_in_rfc3339():
    params = request_body(make_task(deadline=NOW + timedelta(hours=1)), "email")["params"]

    assert params["deadline"] == "2026-07-09T13:00:00Z"


def test_deadline_is_the_earlier_of_deadline_and_start_plus_timeout():
    task = make_task(deadline=NOW + timedelta(hours=1), timeout=90.0)

    assert request_body(task, "email")["params"]["deadline"] == "2026-07-09T12:01:30Z"


def test_metadata_is_omitted_when_empty_and_sent_when_set():
    assert "metadata" not in request_body(make_task(metadata={}), "email")["params"]

    params = request_body(make_task(metadata={"tenant": "acme"}), "email")["params"]

    assert params["metadata"] == {"tenant": "acme"}


def test_the_lease_carries_a_token_for_this_delivery_and_the_heartbeat_interval():
    lease = request_body(make_task(), "email")["params"]["lease"]

    assert set(lease) == {"token", "heartbeatInterval"}
    assert tokens.open_token(lease["token"]) == (TASK_ID, LEASE)


@override_settings(CONVEYOR={"LEASE_TTL": 90})
def test_the_heartbeat_interval_is_a_third_of_the_lease_ttl_as_a_duration_string():
    assert request_body(make_task(), "email")["params"]["lease"]["heartbeatInterval"] == "30s"


def test_a_batch_member_is_identified_by_its_task_id():
    body = request_body(make_task(), "email", member_id=TASK_ID)

    assert body["id"] == TASK_ID
    assert tokens.open_token(body["params"]["lease"]["token"]) == (TASK_ID, LEASE)


def test_the_envelope_is_json_serializable():
    task = make_task(metadata={"tenant": "acme"}, deadline=NOW + timedelta(minutes=5))

    assert json.loads(json.dumps(request_body(task, "email"))) == request_body(task, "email")


def test_the_envelope_has_exactly_the_documented_fields():
    task = make_task(metadata={"tenant": "acme"}, deadline=NOW + timedelta(minutes=5))
    body = request_body(task, "email")

    assert set(body) == {"jsonrpc", "id", "method", "params"}
    assert set(body["params"]) == {
        "taskId",
        "queue",
        "type",
        "attempt",
        "maxRetry",
        "deadline",
        "contentType",
        "payload",
        "metadata",
        "lease",
    }


# -- read_answer ---------------------------------------------------------------------------


def answer(**fields) -> dict:
    return {"jsonrpc": "2.0", "id": LEASE, **fields}


def test_completed_is_success():
    assert read_answer(answer(result={"status": "completed"}), LEASE) == (p.SUCCESS, "")


def test_accepted_parks_the_task():
    assert read_answer(answer(result={"status": "accepted"}), LEASE) == ("accepted", "")


def test_code_32000_is_a_retryable_failure_with_its_message():
    outcome = read_answer(answer(error={"code": -32000, "message": "smtp timeout"}), LEASE)

    assert outcome == (p.RETRY, "smtp timeout")


def test_code_32001_is_a_permanent_failure():
    outcome = read_answer(answer(error={"code": -32001, "message": "bad address"}), LEASE)

    assert outcome == (p.SKIP_RETRY, "bad address")


@pytest.mark.parametrize("code", [-32603, -32601, 0, 1, 500])
def test_any_other_code_is_an_endpoint_fault_that_retries(code):
    assert read_answer(answer(error={"code": code, "message": "boom"}), LEASE) == (p.RETRY, "boom")


def test_an_error_without_a_message_names_its_code():
    assert read_answer(answer(error={"code": -32000}), LEASE) == (p.RETRY, "error -32000")


def test_a_long_error_message_is_truncated():
    outcome, error = read_answer(answer(error={"code": -32000, "message": "x" * 5000}), LEASE)

    assert outcome == p.RETRY
    assert len(error) == MAX_ERROR


@pytest.mark.parametrize("wrong_id", ["01KX3E7T2M4Q9RZC8B1JW5HD6Q", None, 1, ""])
def test_an_answer_to_another_id_is_a_transport_failure(wrong_id):
    with pytest.raises(TransportFailure, match="does not match"):
        read_answer(answer(id=wrong_id, result={"status": "completed"}), LEASE)


def test_an_answer_with_both_result_and_error_is_a_transport_failure():
    with pytest.raises(TransportFailure, match="exactly one of result and error"):
        read_answer(answer(result={"status": "completed"}, error={"code": -32000}), LEASE)


def test_an_answer_with_neither_result_nor_error_is_a_transport_failure():
    with pytest.raises(TransportFailure, match="exactly one of result and error"):
        read_answer(answer(), LEASE)


@pytest.mark.parametrize("result", [{"status": "done"}, {}, None, "completed", ["completed"]])
def test_a_result_without_a_known_status_is_a_transport_failure(result):
    with pytest.raises(TransportFailure, match="completed or accepted"):
        read_answer(answer(result=result), LEASE)


@pytest.mark.parametrize("error", [{"code": "-32000"}, {"message": "no code"}, "boom", -32000, None, {"code": 1.5}])
def test_an_error_that_is_not_an_object_with_an_integer_code_is_a_transport_failure(error):
    with pytest.raises(TransportFailure, match="integer code"):
        read_answer(answer(error=error), LEASE)


@pytest.mark.parametrize(
    "value", [None, [], "ok", 200, [{"jsonrpc": "2.0", "id": LEASE, "result": {"status": "completed"}}]]
)
def test_a_non_object_answer_is_a_transport_failure(value):
    with pytest.raises(TransportFailure, match="malformed"):
        read_answer(value, LEASE)


@pytest.mark.parametrize("version", [None, "1.0", 2.0])
def test_an_answer_that_is_not_json_rpc_2_is_a_transport_failure(version):
    with pytest.raises(TransportFailure, match="malformed"):
        read_answer({"jsonrpc": version, "id": LEASE, "result": {"status": "completed"}}, LEASE)
