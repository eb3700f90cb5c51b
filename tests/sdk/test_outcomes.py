"""What a handler's Fail, Release and a missing handler do to a task, on a real embedded node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conveyor import embedded
from conveyor.sdk import Client, Fail, Release, Task, TaskInfo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node() -> Iterator[embedded.EmbeddedNode]:
    with embedded.start() as running:
        yield running


def until(client: Client, task_id: str, done: Callable[[TaskInfo], bool], timeout: float = 20.0) -> TaskInfo:
    deadline = time.monotonic() + timeout
    while True:
        info = client.get_task(task_id)
        if done(info) or time.monotonic() > deadline:
            return info
        time.sleep(0.05)


def serving(node: embedded.EmbeddedNode, queue: str, handlers: dict[str, Callable[[Task], Any]]) -> Any:
    worker = node.worker(concurrency=2, queues={queue: 1})
    for task_type, handler in handlers.items():
        worker.task(task_type)(handler)
    threading.Thread(target=worker.run, daemon=True).start()
    return worker


def test_fail_stores_its_error_verbatim(node: embedded.EmbeddedNode) -> None:
    def refuse(task: Task) -> None:
        raise Fail("line one\nline two", skip_retry=task.payload["last"])

    worker = serving(node, "fail", {"refuse": refuse})
    client = node.client()
    try:
        final = client.enqueue("refuse", {"last": True}, queue="fail", max_retry=5)
        again = client.enqueue("refuse", {"last": False}, queue="fail", max_retry=5)
        archived = until(client, final.id, lambda t: t.state == "archived")
        retried = until(client, again.id, lambda t: t.retried >= 1)
    finally:
        worker.stop()

    assert (archived.state, archived.retried, archived.last_error) == ("archived", 0, "line one\nline two")
    assert retried.last_error == "line one\nline two"  # a retry, with the same text


def test_release_gives_the_task_back_without_spending_a_retry(node: embedded.EmbeddedNode) -> None:
    attempts: list[int] = []

    def once_later(task: Task) -> str:
        attempts.append(task.attempt)
        if len(attempts) == 1:
            raise Release()
        return "done"

    worker = serving(node, "release", {"once-later": once_later})
    client = node.client()
    try:
        task = client.enqueue("once-later", {}, queue="release", retention=3600)
        info = until(client, task.id, lambda t: t.state == "completed")
    finally:
        worker.stop()

    assert (info.state, info.retried, info.last_error, info.result) == ("completed", 0, "", "done")
    assert attempts == [1, 1]  # the released attempt did not count


def test_a_type_without_a_handler_is_released_not_retried(node: embedded.EmbeddedNode) -> None:
    worker = serving(node, "nohandler", {"something-else": lambda task: None})
    client = node.client()
    try:
        task = client.enqueue("nobody-handles-this", {}, queue="nohandler", max_retry=3)
        time.sleep(2)  # a retry would count at the first delivery; a release loop would spin meanwhile
        info = client.get_task(task.id)
    finally:
        worker.stop()

    assert info.state in ("pending", "active"), info
    assert (info.retried, info.last_error) == (0, "")
