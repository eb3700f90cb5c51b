"""JSON log records: Conveyor's field names, the node, a task's id and queue."""

from __future__ import annotations

import io
import json
import logging

from conveyor import logs


def emitted(record_extra: dict[str, str], node: str | None) -> dict[str, object]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    handler.addFilter(logs.NodeFilter())
    logger = logging.getLogger("conveyor.test-logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logs._node.clear()
        if node is not None:
            logs.set_node(node)
        logger.warning("task %s failed", "t-1", extra=record_extra)
    finally:
        logger.removeHandler(handler)
        logs._node.clear()
    return json.loads(stream.getvalue())


def test_a_record_about_a_task_carries_its_id_queue_and_the_node() -> None:
    record = emitted(logs.log_fields(task_id="t-1", queue="email"), node="host-1-ab")
    assert record["message"] == "task t-1 failed"
    assert (record["level"], record["logger"]) == ("WARNING", "conveyor.test-logs")
    assert (record["task_id"], record["queue"], record["node"]) == ("t-1", "email", "host-1-ab")
    assert "time" in record


def test_a_process_that_runs_no_node_leaves_the_field_out() -> None:
    record = emitted(logs.log_fields(queue="email"), node=None)
    assert record["queue"] == "email" and "node" not in record and "task_id" not in record
