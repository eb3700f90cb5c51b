"""A Redis outage under a two-node cluster: wakes are lost, tasks are not.

Redis carries only hints between nodes (wakes, cancels, events); the tasks
live in PostgreSQL. With Redis killed, a task enqueued on one node cannot
wake the dispatcher on the other; once Redis is back the nodes resubscribe
and the dispatcher's self-check picks up what the lost wakes did not
announce. The Redis here is a private redis-server on a free loopback port,
so the machine's own Redis is never touched.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from websockets.sync.client import connect as ws_connect

from tests.e2e.conftest import base_env
from tests.e2e.support import NodeProcess, WorkerProcess, read_events, wait_for
from tests.services import redis_problem


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: redis_problem(self.url) is None, 10, what="the private redis-server")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = PrivateRedis(tmp_path)
    redis.start()
    yield redis
    redis.kill()


def _enqueued_event(ws, task_id: str) -> dict | None:
    try:
        events = json.loads(ws.recv(timeout=0.5))["events"]
    except TimeoutError:
        return None
    return next((e for e in events if e["task_id"] == task_id and e["kind"] == "enqueued"), None)


@pytest.fixture
def two_nodes(pg_database: str, private_redis: PrivateRedis, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``start(**settings)``: a serving node with a worker of queue "outage" and
    a producing node, on the private Redis, with no self-check or reaper to
    stand in for a lost wake; stopped at the end."""
    processes: list[Any] = []

    def start(**settings: str) -> tuple[NodeProcess, NodeProcess, WorkerProcess]:
        env = {
            **base_env(),
            "DATABASE_URL": pg_database,
            "REDIS_URL": private_redis.url,
            "CONVEYOR_CHANNEL_PREFIX": f"outage{uuid.uuid4().hex[:6]}",
            "CONVEYOR_ALLOW_UNAUTHENTICATED": "1",
            "CONVEYOR_DISPATCH_SELF_CHECK": "120s",
            "CONVEYOR_REAPER_INTERVAL": "120s",
            **{f"CONVEYOR_{name.upper()}": value for name, value in settings.items()},
        }
        serving = NodeProcess(env, dev=False, name="serving")
        processes.append(serving)
        producing = NodeProcess(env, dev=False, name="producing")
        processes.append(producing)
        worker = WorkerProcess(serving.url, base_env(), tmp_path / "worker.jsonl", queues="outage=1", concurrency=4)
        processes.append(worker)
        worker.wait_connected(serving)
        return serving, producing, worker

    yield start
    for proc in processes:
        if proc.proc.poll() is None:
            proc.kill()


def test_tasks_enqueued_while_redis_is_down_run_once_after_it_returns(two_nodes, private_redis):
    # Wakes are the subject: an idle worker's offers would hand it the tasks
    # through PostgreSQL (the next test). A queue with a concurrency limit
    # takes no offer (its lease has a limit to honour), so only a wake or a
    # sweep can start its tasks.
    serving, producing, worker = two_nodes()
    serving.api("PUT", "/api/v1/queues/outage/concurrency-limit", json={"limit": 1000})

    def done_ids() -> Counter:
        return Counter(e["task"] for e in worker.events() if e["event"] == "done")

    before = producing.enqueue(queue="outage", json={}, retention="5m")
    wait_for(lambda: before["id"] in done_ids(), 20, what="a task before the outage")
    # Let the serving node settle: its ack committed, and the lease its
    # freed credit starts found the queue empty (else that lease, not a
    # wake, could pick up what is enqueued next).
    wait_for(lambda: serving.task(before["id"])["state"] == "completed", 20, what="the ack")
    time.sleep(0.5)

    private_redis.kill()
    during = [producing.enqueue(queue="outage", json={"n": i}, retention="5m")["id"] for i in range(5)]
    time.sleep(1.0)  # the nodes notice the dropped connection
    assert not any(i in done_ids() for i in during)  # no wake could reach the serving node
    private_redis.start()

    # Wakes cross Redis again once both nodes have reconnected: probe
    # until one does (a probe sent before the resubscription is lost too).
    probes: list[str] = []

    def woken() -> bool:
        if any(p in done_ids() for p in probes):
            return True
        probes.append(producing.enqueue(queue="outage", json={}, retention="5m")["id"])
        return False

    wait_for(woken, 30, interval=2.0, what="a wake through the restarted Redis")
    wait_for(lambda: all(i in done_ids() for i in during + probes), 20, what="everything enqueued since")

    # Events cross too: the producing node's reach a subscriber of the serving node.
    events_url = serving.url.replace("http://", "ws://") + "/ws/events?queue=outage"
    with ws_connect(events_url, open_timeout=10) as ws:
        time.sleep(0.3)  # the consumer subscribes to the events group
        after = producing.enqueue(queue="outage", json={})
        heard = wait_for(lambda: _enqueued_event(ws, after["id"]), 20, what="an event across Redis")
    assert heard["kind"] == "enqueued"
    wait_for(lambda: after["id"] in done_ids(), 20, what="a task after the outage")

    counts = done_ids()
    every = [before["id"], *during, *probes, after["id"]]
    assert {i: counts[i] for i in every} == dict.fromkeys(every, 1)
    for task_id in during:
        assert serving.task(task_id)["state"] == "completed"
    starts = Counter(e["task"] for e in read_events([worker.log]) if e["event"] == "start")
    assert all(starts[i] == 1 for i in during), starts


def test_an_idle_workers_offers_reach_it_while_redis_is_down(two_nodes, private_redis, pg_database):
    _, producing, worker = two_nodes()

    def offers() -> int:
        with psycopg.connect(pg_database) as conn:
            return conn.execute("SELECT count(*) FROM conveyor_offer").fetchone()[0]

    wait_for(lambda: offers() == 4, 20, what="the idle worker's credit offered")

    private_redis.kill()
    # No wake can cross, but an enqueue on the other node takes the idle
    # worker's offer in its INSERT, and PostgreSQL notifies the serving node.
    during = [producing.enqueue(queue="outage", json={"n": i}, retention="5m") for i in range(3)]
    assert [t["state"] for t in during] == ["active"] * 3
    done = lambda: Counter(e["task"] for e in worker.events() if e["event"] == "done")  # noqa: E731
    wait_for(lambda: all(t["id"] in done() for t in during), 20, what="the tasks run with Redis down")
    assert all(done()[t["id"]] == 1 for t in during)
