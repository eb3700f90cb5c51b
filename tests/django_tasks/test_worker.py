"""conveyor_worker and task types it has no function for: given back, never retried to death.

Real processes: a dev node, ``manage.py conveyor_worker``, and an SDK worker
(tests/e2e/worker_app.py) that handles the non-Django type ``e2e``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.tasks import TaskResultStatus

from tests.django_tasks.support import Runner, Stack, stack_env, start_stack, start_worker
from tests.django_tasks.tasks import add, halfway_then_wait
from tests.e2e.support import ROOT, NodeProcess, Process, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = start_stack(tmp_path / "signals.jsonl")
    yield running
    running.stop()


def sdk_worker(node: NodeProcess, tmp_path: Path) -> Process:
    """A worker for type ``e2e`` on the default queue; each task's result names its pid."""
    argv = [sys.executable, str(ROOT / "tests" / "e2e" / "worker_app.py"), "--url", node.url]
    argv += ["--log", str(tmp_path / "sdk-worker.jsonl"), "--concurrency", "2"]
    worker = Process(argv, stack_env(tmp_path / "unused.jsonl"), "sdk-worker")
    sessions = len(node.api("GET", "/api/v1/workers")["workers"])
    wait_for(lambda: len(node.api("GET", "/api/v1/workers")["workers"]) > sessions, 30, what="SDK worker session")
    return worker


class Releases:
    """Counts the node's ``released`` events of a task type, from its event stream."""

    def __init__(self, node: NodeProcess, task_type: str) -> None:
        self.count = 0
        self._connected = threading.Event()
        self._stop = threading.Event()
        params = {"type": task_type, "kind": "released"}
        self._thread = threading.Thread(target=self._follow, args=(node.url, params), daemon=True)
        self._thread.start()
        assert self._connected.wait(10), "event stream did not connect"

    def _follow(self, url: str, params: dict[str, str]) -> None:
        timeout = httpx.Timeout(10, read=0.5)
        with httpx.stream("GET", f"{url}/api/v1/events", params=params, timeout=timeout) as response:
            lines = response.iter_lines()
            while not self._stop.is_set():
                try:
                    line = next(lines)
                except httpx.ReadTimeout:
                    return  # nothing for half a second: the stream is read up to now
                if line.startswith(": connected"):
                    self._connected.set()
                elif line == "event: released":
                    self.count += 1

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.count


def test_a_type_it_has_no_function_for_is_left_for_the_worker_that_has_it(stack: Stack, tmp_path: Path) -> None:
    other = sdk_worker(stack.node, tmp_path)
    try:
        foreign = [stack.node.enqueue(type="e2e", json={}, max_retry=3, retention="1h")["id"] for _ in range(10)]
        ours = [add.enqueue(i, i) for i in range(3)]
        runner = Runner("conveyor", stack.signal_log, stack)
        for result in ours:
            runner.wait(result)
        done = wait_for(
            lambda: all((t := stack.node.task(i))["state"] == "completed" and t for i in foreign) and foreign,
            30,
            what="the e2e tasks to complete",
        )
        assert done
        finished = [stack.node.task(i) for i in foreign]
    finally:
        other.stop()

    assert [r.status for r in ours] == [TaskResultStatus.SUCCESSFUL] * 3
    assert [r.return_value for r in ours] == [0, 2, 4]
    assert {(t["retried"], t["last_error"]) for t in finished} == {(0, "")}
    assert {t["result"]["pid"] for t in finished} == {other.pid}  # the SDK worker ran every one


def test_with_no_worker_for_its_type_a_task_waits_and_the_giving_back_is_paced(stack: Stack, tmp_path: Path) -> None:
    releases = Releases(stack.node, "e2e")
    task_id = stack.node.enqueue(type="e2e", json={}, max_retry=3, retention="1h")["id"]
    time.sleep(4)
    released = releases.stop()
    waiting = stack.node.task(task_id)

    assert waiting["state"] in ("pending", "active"), waiting
    assert (waiting["retried"], waiting["last_error"]) == (0, "")
    # After ten give-backs in a row the node feeds the type to this worker's
    # three slots at most once a second each (docs/protocol.md §7.5); a loop
    # with no pacing gives back thousands in four seconds.
    assert 1 <= released <= 40, released
    assert stack.worker.output().count("no function for task type 'e2e'") == 1

    other = sdk_worker(stack.node, tmp_path)
    try:
        done = wait_for(lambda: stack.node.task(task_id)["state"] == "completed", 30, what="the late worker to run it")
        assert done
        assert stack.node.task(task_id)["retried"] == 0
    finally:
        other.stop()


def test_a_django_task_whose_function_is_gone_is_released_too(tmp_path: Path) -> None:
    env = stack_env(tmp_path / "signals.jsonl")
    node = NodeProcess(env, dev=True, name="gone-node")
    try:
        worker = start_worker(node, env, queues="default=1", concurrency=1)
        try:
            task_id = node.enqueue(type="django:tests.django_tasks.tasks.no_such_function", json={}, max_retry=3)["id"]
            time.sleep(2)
            waiting = node.task(task_id)
            assert (waiting["retried"], waiting["last_error"]) == (0, "")
            wait_for(lambda: "no_such_function" in worker.output(), 10, what="the worker to say why")
            assert "cannot import tests.django_tasks.tasks.no_such_function" in worker.output()
        finally:
            worker.stop()
    finally:
        node.stop()


def test_prefetch_holds_tasks_beyond_the_concurrency_and_runs_them_in_turn(tmp_path: Path) -> None:
    env = stack_env(tmp_path / "signals.jsonl")
    node = NodeProcess(env, dev=True, name="prefetch-node")
    try:
        worker = start_worker(node, env, queues="default=1", concurrency=1, prefetch=2)
        gate = tmp_path / "gate"
        try:
            ids = [halfway_then_wait.enqueue(str(gate)).id for _ in range(4)]

            def states() -> list[dict]:
                return [node.task(i) for i in ids]

            # One runs (it reports progress), two wait leased in the window, one stays pending.
            wait_for(lambda: sum(t["state"] == "active" for t in states()) == 3, 15, what="three tasks leased")
            wait_for(lambda: any(t["progress"] for t in states()), 15, what="the running task's progress")
            time.sleep(0.5)  # nothing more is sent while the window is full
            held = states()
            assert sorted(t["state"] for t in held) == ["active", "active", "active", "pending"]
            assert sum(bool(t["progress"]) for t in held) == 1
            gate.touch()
            wait_for(lambda: all(t["state"] == "completed" for t in states()), 30, what="all four to complete")
            assert {t["retried"] for t in states()} == {0}
        finally:
            worker.stop()
    finally:
        node.stop()


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--prefetch", "1001"], "--prefetch must be from 0 to 1000"), (["--concurrency", "0"], "--concurrency")],
)
def test_a_bad_prefetch_or_concurrency_is_a_command_error(argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("conveyor_worker", "--url", "http://127.0.0.1:9", *argv)
