"""``conveyor enqueue`` and ``conveyor enqueue-tx``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.broker import TaskSpec
from conveyor.models import Task
from tests.cli.support import fails, run, table

pytestmark = pytest.mark.django_db(transaction=True)


def test_enqueue_prints_the_new_id_and_stores_the_task(broker):
    result = run(
        "enqueue", "email:send", "--queue", "mail", "--json-payload", '{"to": "a@b.c"}',
        "--priority", "7", "--max-retry", "3", "--metadata", "region=eu", "--concurrency-key", "acct-1",
    )  # fmt: skip

    task = Task.objects.get()
    assert result.out.strip() == f"enqueued {task.id} (queue mail, type email:send, state pending)"
    assert (task.queue, task.type, task.state, task.priority, task.max_retry) == ("mail", "email:send", "pending", 7, 3)
    assert json.loads(bytes(task.payload)) == {"to": "a@b.c"}
    assert task.content_type == "application/json"
    assert task.metadata == {"region": "eu"}
    assert task.concurrency_key == "acct-1"


def test_enqueue_json_output_is_the_stored_task(broker):
    data = run("--json", "enqueue", "report:build", "--id", "report-1").json()

    assert data["id"] == "report-1"
    assert data["state"] == "pending"
    assert broker.get_task("report-1").type == "report:build"


def test_enqueue_an_existing_id_returns_the_stored_task_unchanged(broker):
    broker.enqueue(TaskSpec(type="report:build", id="report-1", queue="reports"))

    result = run("enqueue", "other:type", "--id", "report-1")

    assert result.out.strip() == "exists already: report-1 (queue reports, type report:build, state pending)"
    assert Task.objects.get().type == "report:build"


def test_enqueue_process_in_accepts_a_duration_and_schedules(broker):
    before = datetime.now(UTC)
    run("enqueue", "later", "--id", "t1", "--process-in", "5m")

    task = broker.get_task("t1")
    assert task.state == "scheduled"
    assert before + timedelta(seconds=299) <= task.due_at <= datetime.now(UTC) + timedelta(seconds=301)


def test_enqueue_process_at_takes_an_rfc3339_time(broker):
    run("enqueue", "later", "--id", "t1", "--process-at", "2099-01-02T03:04:05Z")

    task = broker.get_task("t1")
    assert task.state == "scheduled"
    assert task.due_at == datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_enqueue_payload_file_reads_json_and_binary_bodies(broker, tmp_path):
    (tmp_path / "p.json").write_text('{"n": 1}')
    (tmp_path / "p.bin").write_bytes(b"\x00\xffraw")
    run("enqueue", "j", "--id", "json-body", "--payload-file", str(tmp_path / "p.json"))
    run("enqueue", "b", "--id", "raw-body", "--payload-file", str(tmp_path / "p.bin"))

    as_json, raw = broker.get_task("json-body"), broker.get_task("raw-body")
    assert (bytes(as_json.payload), as_json.content_type) == (b'{"n": 1}', "application/json")
    assert (bytes(raw.payload), raw.content_type) == (b"\x00\xffraw", "application/octet-stream")


def test_enqueue_unique_key_refuses_a_second_live_task(broker):
    run("enqueue", "sync", "--unique-key", "acct-7")

    message = fails("enqueue", "sync", "--unique-key", "acct-7")

    assert "unique key 'acct-7' is held by a live task" in message
    assert Task.objects.count() == 1


def test_enqueue_depends_on_stores_the_edges_and_waits_blocked(broker):
    broker.enqueue(TaskSpec(type="first", id="a"))
    broker.enqueue(TaskSpec(type="first", id="b"))

    run("enqueue", "join", "--id", "j", "--depends-on", "a", "b", "--on-failure", "continue")

    task = broker.get_task("j")
    assert task.state == "blocked"
    assert sorted(task.dependency_edges.values_list("depends_on_id", "on_failure")) == [
        ("a", "continue"),
        ("b", "continue"),
    ]


def test_enqueue_group_lands_aggregating(broker):
    run("enqueue", "digest", "--id", "g1", "--group", "daily")

    assert broker.get_task("g1").state == "aggregating"


def test_enqueue_bad_duration_names_the_flag_and_stores_nothing():
    message = fails("enqueue", "later", "--process-in", "soon")

    assert message == "--process-in: invalid duration 'soon'; use e.g. 30s, 5m, 2h, 7d"
    assert not Task.objects.exists()


def test_enqueue_invalid_priority_names_the_flag_and_stores_nothing():
    assert fails("enqueue", "x", "--priority", "12") == "--priority: must be between 1 and 9"
    assert fails("enqueue", "x", "--priority", "high") == "--priority: 'high' is not an integer"
    assert not Task.objects.exists()


def test_enqueue_invalid_json_payload_is_refused():
    assert fails("enqueue", "x", "--json-payload", "{nope").startswith("--json-payload: is not valid JSON")
    assert not Task.objects.exists()


def test_enqueue_unknown_dependency_is_refused():
    assert fails("enqueue", "x", "--depends-on", "ghost") == "--depends-on[0].task_id: unknown task ghost"
    assert not Task.objects.exists()


def test_enqueue_missing_payload_file_is_one_line():
    message = fails("enqueue", "x", "--payload-file", "/nonexistent/p.json")

    assert message == "--payload-file: cannot read /nonexistent/p.json: No such file or directory"


# -- enqueue-tx -------------------------------------------------------------------


def test_enqueue_tx_stores_every_task_of_a_list_file(broker, tmp_path):
    path = tmp_path / "tx.json"
    path.write_text(
        json.dumps([{"type": "a", "id": "tx-1"}, {"type": "b", "id": "tx-2", "queue": "q2", "json": {"k": 1}}])
    )

    rows = table(run("enqueue-tx", "--file", str(path)))

    assert rows[0][:4] == ["ID", "QUEUE", "TYPE", "STATE"]
    assert sorted(r[0] for r in rows[1:]) == ["tx-1", "tx-2"]
    assert broker.get_task("tx-2").queue == "q2"
    assert json.loads(bytes(broker.get_task("tx-2").payload)) == {"k": 1}


def test_enqueue_tx_accepts_a_tasks_object_and_prints_json(broker, tmp_path):
    path = tmp_path / "tx.json"
    path.write_text(
        json.dumps({"tasks": [{"type": "a", "id": "tx-1"}, {"type": "b", "id": "tx-2", "depends_on": ["tx-1"]}]})
    )

    data = run("--json", "enqueue-tx", "--file", str(path)).json()

    assert [(t["id"], t["state"]) for t in data["tasks"]] == [("tx-1", "pending"), ("tx-2", "blocked")]


def test_enqueue_tx_with_one_bad_item_stores_none_and_names_its_index(tmp_path):
    path = tmp_path / "tx.json"
    path.write_text(json.dumps([{"type": "a"}, {"type": "b", "priority": 99}]))

    assert fails("enqueue-tx", "--file", str(path)) == "item 1: priority: must be between 1 and 9"
    assert not Task.objects.exists()


def test_enqueue_tx_with_a_bad_duration_in_an_item_names_its_index(tmp_path):
    path = tmp_path / "tx.json"
    path.write_text(json.dumps([{"type": "a", "process_in": "later"}]))

    assert fails("enqueue-tx", "--file", str(path)).startswith("item 0: process_in: invalid duration 'later'")
    assert not Task.objects.exists()


def test_enqueue_tx_file_that_is_not_a_task_list_is_refused(tmp_path):
    path = tmp_path / "tx.json"
    path.write_text('{"items": []}')

    assert fails("enqueue-tx", "--file", str(path)) == '--file: must hold a list of tasks or {"tasks": [...]}'
