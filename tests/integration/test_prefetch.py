"""The prefetch window (docs/protocol.md §4.1 `prefetch`, §6.6 `started`, §12.2), on a real dev node.

A raw ``websockets`` worker declares a window, and tasks it holds beyond its
concurrency are dispatched; a worker process killed with SIGKILL leaves
the node to settle what it held by its ``started`` frames.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from conveyor.sdk import Worker
from conveyor.sdk import protocol as p
from tests.e2e.conftest import base_env, dev_node
from tests.e2e.support import ROOT, NodeProcess, wait_for
from tests.integration.test_worker_protocol import run, worker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    yield from dev_node(tmp_path_factory, "prefetch")


@pytest.fixture
def queue() -> str:
    return f"pf-{uuid.uuid4().hex[:10]}"


def test_a_prefetch_window_is_granted_and_bounded(node, queue):
    async def scenario():
        async with worker(node) as w:
            welcome = await w.hello({queue: 1}, concurrency=1, prefetch=2)
            for _ in range(5):
                await w.enqueue(queue=queue)
            got = [await w.frame(p.DISPATCH) for _ in range(3)]
            with pytest.raises(TimeoutError):
                await w.frame(p.DISPATCH, timeout=1.0)  # window full: nothing more
            await w.send({"type": "result", "task_id": got[0]["task_id"], "outcome": "success"})
            return welcome, got, await w.frame(p.DISPATCH)

    welcome, got, fourth = run(scenario())

    assert welcome["prefetch"] == 2
    assert len({g["task_id"] for g in got} | {fourth["task_id"]}) == 4


# A worker that holds concurrency + prefetch tasks, says it started the
# first STARTED of them, prints "ready" with the ids it holds and "marked"
# with those the node marked started at delivery, and waits to be killed.
CRASHING_WORKER = """
import asyncio, json, sys, websockets
url, queue, concurrency, prefetch, started = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
async def main():
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"type": "hello", "queues": {queue: 1}, "concurrency": concurrency,
                                  "prefetch": prefetch}))
        held, marked = [], []
        while len(held) < concurrency + prefetch:
            data = json.loads(await asyncio.wait_for(ws.recv(), 20))  # else: no "ready", the test fails
            frames = [f for f in (data if isinstance(data, list) else [data]) if f["type"] == "dispatch"]
            held += [f["task_id"] for f in frames]
            marked += [f["task_id"] for f in frames if f.get("started")]
        if started:
            await ws.send(json.dumps({"type": "started", "task_ids": held[:started]}))
        print("ready " + " ".join(held), flush=True)
        print("marked " + " ".join(marked), flush=True)
        await asyncio.sleep(600)
asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("concurrency", "prefetch", "started"),
    [(1, 2, 0), (2, 1, 0), (1, 2, 1), (1, 2, 2)],
    ids=["one-marked-two-waiting", "two-marked-one-waiting", "one-marked-also-told", "one-marked-one-told-one-waiting"],
)
def test_a_crash_settles_only_started_tasks_and_releases_the_waiting_ones(node, queue, concurrency, prefetch, started):
    """The first *concurrency* dispatches are marked started at delivery
    (docs/protocol.md §6.6), the others are started by the worker's `started`
    frame (which changes nothing for a marked one): a crash settles those
    as started and releases the rest, which were only waiting."""
    ids = [node.enqueue(queue=queue, max_retry=3)["id"] for _ in range(concurrency + prefetch)]
    url = node.url.replace("http://", "ws://") + p.WORKER_PATH
    argv = [sys.executable, "-c", CRASHING_WORKER, url, queue, str(concurrency), str(prefetch), str(started)]
    proc = subprocess.Popen(argv, cwd=ROOT, env=base_env(), stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("ready"), line
        held = line.split()[1:]
        marked = proc.stdout.readline().split()[1:]  # type: ignore[union-attr]
        assert sorted(held) == sorted(ids)
        assert marked == held[:concurrency]
        # (The node reads its `started` frame before it sees the connection drop.)
        wait_for(lambda: all(node.task(t)["state"] == "active" for t in ids), what="all leased")
    finally:
        proc.kill()
        proc.wait(10)

    def after_crash():
        tasks = [node.task(t) for t in held]
        return tasks if all(t["state"] != "active" for t in tasks) else None

    settled = wait_for(after_crash, what="the crash settled")
    ran, waited = settled[: max(concurrency, started)], settled[max(concurrency, started) :]

    for task in waited:  # only prefetched: back at once, nothing spent, no suspect
        assert (task["state"], task["retried"], task["suspect"]) == ("pending", 0, False), task
    if len(ran) == 1:  # alone in the crash: charged
        assert (ran[0]["state"], ran[0]["retried"], ran[0]["suspect"]) == ("retry", 1, True), ran[0]
    for task in ran if len(ran) > 1 else []:  # several: suspects, not charged
        assert (task["state"], task["retried"], task["suspect"]) == ("retry", 0, True), task


def test_an_sdk_worker_keeps_its_window_leased_and_gives_it_back_on_a_graceful_stop(tmp_path):
    """Waiting tasks' leases are extended by the SDK's heartbeats like the
    running one's; a graceful stop gives the waiting tasks back at once,
    nothing spent, while the running one finishes."""
    env = {**base_env(), "DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite3", "CONVEYOR_LEASE_TTL": "3s"}
    node = NodeProcess(env, dev=True, name="prefetch-sdk-node")
    gate, began = threading.Event(), threading.Event()
    sdk = Worker(node.url, queues={"default": 1}, concurrency=1, prefetch=2, drain_timeout=30)

    @sdk.task("slow")
    def slow(task):
        began.set()
        assert gate.wait(30)
        return "done"

    thread = threading.Thread(target=sdk.run, daemon=True)
    try:
        ids = [node.enqueue(type="slow", json={}, max_retry=3)["id"] for _ in range(3)]

        def tasks():
            return [node.task(i) for i in ids]

        def all_leased():
            ts = tasks()
            return ts if all(t["state"] == "active" for t in ts) else None

        thread.start()
        assert began.wait(15)
        first = wait_for(all_leased, what="the running task and the two in the window leased")

        def extended():
            ts = tasks()
            later = [t["lease_expires_at"] > f["lease_expires_at"] for t, f in zip(ts, first, strict=True)]
            return ts if all(later) and all(t["state"] == "active" for t in ts) else None

        # Past the first expiry (3 s): each still leased, with a later expiry.
        wait_for(extended, timeout=10, what="every lease extended, the waiting ones too")
        stopper = threading.Thread(target=sdk.stop)
        stopper.start()

        def given_back():
            ts = tasks()
            return ts if sum(t["state"] == "pending" for t in ts) == 2 else None

        back = wait_for(given_back, timeout=10, what="the two waiting tasks given back")
        assert sorted(t["state"] for t in back) == ["active", "pending", "pending"]
        assert {t["retried"] for t in back} == {0}
        gate.set()
        stopper.join(30)
        thread.join(30)
        assert not thread.is_alive()
        done = tasks()
        assert sorted(t["state"] for t in done) == ["completed", "pending", "pending"], done
        assert {t["retried"] for t in done} == {0}
    finally:
        gate.set()
        node.stop()
