"""``conveyor tasks get|list|run|reschedule|cancel|delete|archive``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.broker import TaskSpec
from conveyor.models import Task
from tests.cli.support import fails, run, run_failing, table

pytestmark = pytest.mark.django_db(transaction=True)


def enqueue(broker, task_id, **fields):
    return broker.enqueue(TaskSpec(type=fields.pop("type", "job"), id=task_id, **fields))


# -- get ------------------------------------------------------------------------


def test_get_shows_the_task_as_aligned_fields(broker):
    enqueue(broker, "t1", type="email:send", queue="mail", payload=b'{"to": "a@b.c"}', metadata={"region": "eu"})

    lines = run("tasks", "get", "t1").lines()

    parsed = [re.match(r"^(\S+(?: \S+)*)( {2,})(.*)$", line) for line in lines]
    fields = {m.group(1): m.group(3) for m in parsed}
    assert fields["id"] == "t1"
    assert fields["queue"] == "mail"
    assert fields["state"] == "pending"
    assert fields["retried"] == "0 of 25"
    assert fields["payload"] == '{"to": "a@b.c"}'
    assert fields["metadata"] == "region=eu"
    assert len({m.start(3) for m in parsed}) == 1, "values start in one column"


def test_get_json_is_the_api_rendering(broker):
    enqueue(broker, "t1", payload=b'{"n": 1}')

    data = run("tasks", "get", "t1", "--json").json()

    assert (data["id"], data["state"], data["json"], data["attempt"]) == ("t1", "pending", {"n": 1}, 1)


def test_get_unknown_task_fails_with_one_line():
    assert fails("tasks", "get", "ghost") == "task ghost not found"


# -- list -----------------------------------------------------------------------


def test_list_prints_a_table_newest_first(broker):
    enqueue(broker, "01A", queue="mail")
    enqueue(broker, "01B", queue="mail", process_in=3600)

    rows = table(run("tasks", "list"))

    assert rows[0] == ["ID", "QUEUE", "TYPE", "STATE", "PRIORITY", "RETRIED", "DUE", "ERROR"]
    assert [(r[0], r[3]) for r in rows[1:]] == [("01B", "scheduled"), ("01A", "pending")]


def test_list_filters_by_queue_state_and_type(broker):
    enqueue(broker, "a", queue="mail", type="x")
    enqueue(broker, "b", queue="mail", type="y", process_in=60)
    enqueue(broker, "c", queue="other", type="x")

    def ids(*args):
        return [t["id"] for t in run("--json", "tasks", "list", *args).json()["tasks"]]

    assert ids("--queue", "mail") == ["b", "a"]
    assert ids("--state", "scheduled") == ["b"]
    assert ids("--type", "x") == ["c", "a"]
    assert ids("--search", "c") == ["c"]


def test_list_pages_with_the_next_page_token(broker):
    for task_id in ("01A", "01B", "01C"):
        enqueue(broker, task_id)

    first = run("--json", "tasks", "list", "--limit", "2").json()
    human = run("tasks", "list", "--limit", "2")
    second = run("--json", "tasks", "list", "--limit", "2", "--page-token", first["next_page_token"]).json()

    assert [t["id"] for t in first["tasks"]] == ["01C", "01B"]
    assert human.lines()[-1] == f"more: --page-token {first['next_page_token']}"
    assert [t["id"] for t in second["tasks"]] == ["01A"]
    assert second["next_page_token"] is None


def test_list_with_no_tasks_says_none():
    assert run("tasks", "list").out.strip() == "(none)"


def test_list_bad_state_and_limit_name_the_flag():
    assert fails("tasks", "list", "--state", "done").startswith("--state: must be one of scheduled, pending")
    assert fails("tasks", "list", "--limit", "5000") == "--limit: must be between 1 and 1000"


# -- run / cancel / delete / archive ---------------------------------------------------


def test_run_makes_an_archived_task_due_now(broker):
    enqueue(broker, "t1", process_in=3600)
    broker.archive_task("t1")

    result = run("tasks", "run", "t1")

    assert result.out.strip() == "made due t1 (state pending)"
    assert broker.get_task("t1").state == "pending"


def test_cancel_a_waiting_task(broker):
    enqueue(broker, "t1")

    assert run("tasks", "cancel", "t1").out.strip() == "canceled t1 (state canceled)"
    assert broker.get_task("t1").state == "canceled"


def test_cancel_a_running_task_requests_cancellation(broker):
    enqueue(broker, "t1")
    broker.lease("default", 1)

    result = run("tasks", "cancel", "t1")

    assert result.out.strip() == "cancel requested for t1 (running; the attempt ends archived)"
    task = broker.get_task("t1")
    assert (task.state, task.cancel_requested) == ("active", True)


def test_cancel_several_ids_reports_each_and_fails_when_one_failed(broker):
    enqueue(broker, "t1")
    enqueue(broker, "t2")

    result, message = run_failing("tasks", "cancel", "t1", "ghost", "t2")

    assert message == "1 of 3 ids failed"
    assert table(result)[2] == ["ghost", "not_found", "-", "task", "ghost", "not", "found"]
    assert Task.objects.get(id="t1").state == "canceled"
    assert Task.objects.get(id="t2").state == "canceled"


def test_cancel_several_ids_prints_a_result_table(broker):
    enqueue(broker, "t1")
    enqueue(broker, "t2")

    rows = table(run("tasks", "cancel", "t1", "t2"))

    assert rows == [
        ["ID", "RESULT", "STATE", "ERROR"],
        ["t1", "canceled", "canceled", "-"],
        ["t2", "canceled", "canceled", "-"],
    ]


def test_batch_json_lists_results_per_id(broker):
    enqueue(broker, "t1")
    broker.cancel_task("t1")

    result, message = run_failing("--json", "tasks", "archive", "t1", "ghost")

    assert message == "1 of 2 ids failed"
    results = result.json()["results"]
    assert [(r["id"], r["ok"]) for r in results] == [("t1", True), ("ghost", False)]
    assert results[0]["task"]["state"] == "archived"
    assert results[1]["error"]["error"] == "not_found"


def test_delete_removes_the_task(broker):
    enqueue(broker, "t1")

    assert run("tasks", "delete", "t1").out.strip() == "deleted t1"
    assert not Task.objects.filter(id="t1").exists()


def test_delete_unknown_task_fails():
    assert fails("tasks", "delete", "ghost") == "task ghost not found"


def test_delete_several_ids(broker):
    enqueue(broker, "t1")
    enqueue(broker, "t2")

    rows = table(run("tasks", "delete", "t1", "t2"))

    assert [r[:2] for r in rows[1:]] == [["t1", "deleted"], ["t2", "deleted"]]
    assert not Task.objects.exists()


def test_archive_moves_a_waiting_task_to_the_dead_letters(broker):
    enqueue(broker, "t1")

    assert run("tasks", "archive", "t1").out.strip() == "archived t1 (state archived)"
    assert broker.get_task("t1").state == "archived"


def test_archive_a_completed_task_is_an_invalid_state(broker):
    enqueue(broker, "t1")
    leased = broker.lease("default", 1).tasks[0]
    broker.ack("t1", leased.lease_id)

    assert fails("tasks", "archive", "t1") == "cannot archive task t1 in state completed"
    assert broker.get_task("t1").state == "completed"


# -- reschedule -----------------------------------------------------------------------


def test_reschedule_process_in_moves_the_due_time(broker):
    enqueue(broker, "t1")
    before = datetime.now(UTC)

    result = run("tasks", "reschedule", "t1", "--process-in", "1h")

    task = broker.get_task("t1")
    assert task.state == "scheduled"
    assert before + timedelta(seconds=3599) <= task.due_at <= datetime.now(UTC) + timedelta(seconds=3601)
    assert result.out.startswith("rescheduled t1 (state scheduled, due ")


def test_reschedule_process_at_in_the_past_makes_it_pending(broker):
    enqueue(broker, "t1", process_in=3600)

    run("tasks", "reschedule", "t1", "--process-at", "2020-01-01T00:00:00Z")

    assert broker.get_task("t1").state == "pending"


def test_reschedule_several_ids(broker):
    enqueue(broker, "t1")
    enqueue(broker, "t2")

    rows = table(run("tasks", "reschedule", "t1", "t2", "--process-in", "30s"))

    assert [r[:3] for r in rows[1:]] == [["t1", "rescheduled", "scheduled"], ["t2", "rescheduled", "scheduled"]]


def test_reschedule_bad_duration_names_the_flag_and_changes_nothing(broker):
    enqueue(broker, "t1")

    assert fails("tasks", "reschedule", "t1", "--process-in", "tomorrow").startswith("--process-in: invalid duration")
    assert fails("tasks", "reschedule", "t1") == "--process-in: give exactly one of --process-in and --process-at"
    assert broker.get_task("t1").state == "pending"
