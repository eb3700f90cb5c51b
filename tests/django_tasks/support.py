"""A real dev node and a real ``conveyor_worker`` over the test database, and ways to run tasks on them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.tasks import Task, TaskResult

from tests.django_tasks.signal_log import ENV
from tests.e2e.conftest import base_env
from tests.e2e.support import NodeProcess, Process, wait_for

QUEUES = "default=1,urgent=1,ordered=1"


def stack_env(signal_log: Path) -> dict[str, str]:
    db = settings.DATABASES["default"]["NAME"]  # the test database, already migrated
    return {**base_env(), "DATABASE_URL": f"sqlite:///{db}", ENV: str(signal_log)}


def start_worker(
    node: NodeProcess, env: dict[str, str], *, queues: str = QUEUES, concurrency: int = 3, prefetch: int = 0
) -> Process:
    argv = [sys.executable, "manage.py", "conveyor_worker", "--url", node.url]
    argv += ["--queues", queues, "--concurrency", str(concurrency), "--prefetch", str(prefetch)]
    worker = Process(argv, {**env, "DJANGO_SETTINGS_MODULE": "tests.django_tasks.settings"}, "conveyor_worker")
    sessions = len(node.api("GET", "/api/v1/workers")["workers"])
    wait_for(
        lambda: len(node.api("GET", "/api/v1/workers")["workers"]) > sessions or worker.proc.poll() is not None,
        30,
        what="conveyor_worker to connect",
    )
    assert worker.proc.poll() is None, worker.output()
    return worker


@dataclass
class Stack:
    node: NodeProcess
    worker: Process
    signal_log: Path
    # Read at the start: the sessions table is emptied with the rest of the
    # database between tests, while the session itself goes on.
    session_ids: set[str]

    def stop(self) -> None:
        try:
            self.worker.stop()
        finally:
            self.node.stop()


def start_stack(signal_log: Path) -> Stack:
    env = stack_env(signal_log)
    node = NodeProcess(env, dev=True, name="django-tasks-node")
    try:
        worker = start_worker(node, env)
    except BaseException:
        node.stop()
        raise
    sessions = {w["id"] for w in node.api("GET", "/api/v1/workers")["workers"]}
    return Stack(node, worker, signal_log, sessions)


@dataclass
class Runner:
    """Runs a task on one backend and hands back its finished result."""

    name: str
    signal_log: Path
    stack: Stack | None = None

    def run(self, task: Task, *args: Any, **kwargs: Any) -> TaskResult:
        result = task.enqueue(*args, **kwargs)
        if self.stack is not None:
            self.wait(result)
        return result

    def wait(self, result: TaskResult, timeout: float = 30.0) -> None:
        """Refresh *result* until it is finished."""
        assert self.stack is not None
        try:
            wait_for(lambda: (result.refresh(), result.is_finished)[1], timeout, what=f"{result.id} to finish")
        except AssertionError:
            raise AssertionError(f"{result.id} did not finish:\n{self.stack.worker.output()[-3000:]}") from None
