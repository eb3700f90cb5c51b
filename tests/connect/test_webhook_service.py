"""WebhookService over its Connect JSON path: Heartbeat and ReportResult, authenticated by the delivery's lease token alone."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from conveyor.models import Task
from conveyor.webhooks import tokens
from tests.api.conftest import TOKEN, connect_refused, enqueue, lease, ok, state_of_everything
from tests.connect.clients import post

pytestmark = pytest.mark.django_db(transaction=True)


def callback(method, body):
    return post(f"/conveyor.v1.WebhookService/{method}", json.dumps(body))


def heartbeat(api, token):
    return callback("Heartbeat", {"leaseToken": token})


def report(api, token, outcome="TASK_OUTCOME_SUCCESS", **extra):
    return callback("ReportResult", {"leaseToken": token, "outcome": outcome, **extra})


def test_heartbeat_extends_the_lease(api, delivery):
    task, token = delivery
    before = Task.objects.get(id=task.id).lease_expires_at
    assert ok(heartbeat(api, token)) == {}
    after = Task.objects.get(id=task.id)
    assert after.lease_expires_at >= before
    assert after.state == "active"


def test_callbacks_need_no_api_token_even_when_tokens_are_configured(tokens, delivery):
    _, token = delivery
    ok(heartbeat(None, token))
    assert ok(report(None, token)) == {}


def test_report_success_completes_the_task(api, delivery):
    task, token = delivery
    assert ok(report(api, token)) == {}
    assert Task.objects.get(id=task.id).state == "completed"


def test_report_retry_schedules_a_retry_with_the_error(api, delivery):
    task, token = delivery
    assert ok(report(api, token, "TASK_OUTCOME_RETRY", errorMsg="smtp down")) == {}
    stored = Task.objects.get(id=task.id)
    assert (stored.state, stored.retried, stored.last_error) == ("retry", 1, "smtp down")


def test_report_skip_retry_archives_the_task(api, delivery):
    task, token = delivery
    assert ok(report(api, token, "TASK_OUTCOME_SKIP_RETRY", errorMsg="bad address")) == {}
    stored = Task.objects.get(id=task.id)
    assert (stored.state, stored.last_error) == ("archived", "bad address")


def test_a_second_report_for_the_same_delivery_is_refused_and_changes_nothing(api, delivery):
    _, token = delivery
    ok(report(api, token))
    before = state_of_everything()
    body = connect_refused(report(api, token, "TASK_OUTCOME_RETRY"), 400, "failed_precondition")
    assert "lost" in body["message"]
    assert state_of_everything() == before


def test_a_stale_token_gets_lease_lost_and_changes_nothing(api, broker, delivery):
    task, stale = delivery
    broker.release(task.id, task.lease_id)  # the delivery ended (as if reclaimed)...
    current = lease(broker)  # ...and the task went out again under a new lease
    assert current.id == task.id and current.lease_id != task.lease_id
    before = state_of_everything()
    for response in (heartbeat(api, stale), report(api, stale), report(api, stale, "TASK_OUTCOME_SKIP_RETRY")):
        body = connect_refused(response, 400, "failed_precondition")
        assert body["message"] == f"lease on task {task.id} was lost"
    assert state_of_everything() == before
    # The current delivery's own token still works.
    ok(report(api, tokens.mint(current.id, current.lease_id)))


def test_a_token_minted_by_another_server_is_unauthenticated_and_changes_nothing(api, delivery):
    task, _ = delivery
    with override_settings(SECRET_KEY="another-cluster-secret"):
        foreign = tokens.mint(task.id, task.lease_id)
    before = state_of_everything()
    for response in (heartbeat(api, foreign), report(api, foreign)):
        body = connect_refused(response, 401, "unauthenticated")
        assert "not a lease token issued by this server" in body["message"]
    assert state_of_everything() == before


def forged_tokens(task, token, other):
    prefix, task_part, lease_part, mac = token.split(".")
    other_token = tokens.mint(other.id, other.lease_id)
    yield ".".join((prefix, other_token.split(".")[1], lease_part, mac))  # pointed at another task
    yield ".".join((prefix, task_part, other_token.split(".")[2], mac))  # with another lease id
    yield ".".join((prefix, task_part, lease_part, mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB")))  # MAC changed
    yield ".".join(("clt0", task_part, lease_part, mac))  # another format
    yield token + ".extra"
    yield "!!!.@@@.###.$$$".replace("!!!", tokens.PREFIX)  # undecodable parts
    yield TOKEN  # an API token is not a lease token


def test_forged_tokens_are_unauthenticated_and_change_nothing(api, broker, delivery):
    task, token = delivery
    enqueue(broker, id="job-2")
    other = lease(broker)
    before = state_of_everything()
    for forged in forged_tokens(task, token, other):
        for response in (heartbeat(api, forged), report(api, forged)):
            connect_refused(response, 401, "unauthenticated")
    assert state_of_everything() == before


@pytest.mark.parametrize("body", [{}, {"leaseToken": ""}])
def test_a_missing_token_is_unauthenticated(api, delivery, body):
    before = state_of_everything()
    connect_refused(callback("ReportResult", {**body, "outcome": "TASK_OUTCOME_SUCCESS"}), 401, "unauthenticated")
    connect_refused(callback("Heartbeat", body), 401, "unauthenticated")
    assert state_of_everything() == before


def test_a_token_that_is_not_a_string_is_invalid_argument(api, delivery):
    connect_refused(callback("Heartbeat", {"leaseToken": 5}), 400, "invalid_argument")


@pytest.mark.parametrize(
    "extra",
    [
        {"outcome": "TASK_OUTCOME_MAYBE"},
        {"outcome": ""},
        {"outcome": None},
        {"outcome": "TASK_OUTCOME_RETRY", "errorMsg": 5},
    ],
)
def test_a_bad_outcome_is_invalid_argument_and_changes_nothing(api, delivery, extra):
    _, token = delivery
    before = state_of_everything()
    connect_refused(callback("ReportResult", {"leaseToken": token, **extra}), 400, "invalid_argument")
    assert state_of_everything() == before


def test_read_only_mode_does_not_block_callbacks(read_only, api, delivery):
    # Callbacks finish work already dispatched, like a worker's result.
    _, token = delivery
    assert ok(report(api, token)) == {}
