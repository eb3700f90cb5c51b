"""A node stopped with SIGTERM while producers enqueue over keep-alive connections.

Every request the node read gets its answer before the connection closes;
a request that got no answer was never read, so it stored nothing (a
producer that sends it again duplicates nothing).
"""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from tests.e2e.support import wait_for

PRODUCERS = 4
MAX_SECONDS = 30.0  # each producer stops by itself after this, whatever happens


@dataclass
class Producer:
    """One keep-alive connection enqueuing one task per POST, in a loop."""

    host: str
    port: int
    answered: list[tuple[str, int]] = field(default_factory=list)  # (task id, status)
    closed_by_server: int = 0  # answers that carried ``Connection: close``
    unanswered: list[str] = field(default_factory=list)  # sent, no answer came
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        conn: http.client.HTTPConnection | None = None
        while time.monotonic() < deadline:
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
                try:
                    conn.connect()
                except OSError:  # the node stopped listening: done
                    return
            task_id = uuid.uuid4().hex
            body = json.dumps({"type": "e2e", "id": task_id, "queue": "shutdown"})
            try:
                conn.request("POST", "/api/v1/tasks", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.unanswered.append(task_id)
                self.errors.append(repr(exc))
                conn.close()
                conn = None
                continue
            self.answered.append((task_id, response.status))
            if (response.getheader("Connection") or "").lower() == "close":
                self.closed_by_server += 1
                conn.close()
                conn = None


@pytest.mark.parametrize("mode", ["dev", "cluster"])
def test_sigterm_answers_every_request_it_read(cluster):
    node = cluster.node()
    url = urlsplit(node.url)
    producers = [Producer(url.hostname, url.port) for _ in range(PRODUCERS)]
    threads = [threading.Thread(target=p.run, daemon=True) for p in producers]
    for thread in threads:
        thread.start()
    wait_for(lambda: sum(len(p.answered) for p in producers) >= 400, 30, 0.01, what="enqueues flowing")
    node.signal(signal.SIGTERM)
    assert node.proc.wait(30) == 0, node.output()[-3000:]
    for thread in threads:
        thread.join(MAX_SECONDS)
        assert not thread.is_alive()

    answered = [a for p in producers for a in p.answered]
    unanswered = [task_id for p in producers for task_id in p.unanswered]
    assert answered and all(status == 201 for _, status in answered), {s for _, s in answered}
    restarted = cluster.node()
    stored_without_answer = [t for t in unanswered if restarted.http.get(f"/api/v1/tasks/{t}").status_code != 404]
    assert stored_without_answer == [], (stored_without_answer, [e for p in producers for e in p.errors])
    # And every answer is stored.
    counts = {q["name"]: q["counts"]["pending"] for q in restarted.api("GET", "/api/v1/queues")["queues"]}
    assert counts["shutdown"] == len(answered)
    print(
        f"{len(answered)} answered ({sum(p.closed_by_server for p in producers)} with Connection: close),"
        f" {len(unanswered)} unanswered and not stored"
    )


@pytest.mark.parametrize("mode", ["dev", "cluster"])
def test_a_task_that_finishes_during_the_drain_is_completed_not_run_again(cluster):
    """SIGTERM while a worker runs a task: the node stops dispatching but waits
    (up to half of CONVEYOR_SHUTDOWN_TIMEOUT) for the result, so the task
    completes once instead of being given back and run again elsewhere."""
    from conveyor.sdk import Worker

    node = cluster.node()
    began, gate, runs = threading.Event(), threading.Event(), []
    worker = Worker(node.url, queues={"drain": 1}, concurrency=2, drain_timeout=5)

    @worker.task("e2e")
    def handler(task):
        runs.append(task.id)
        began.set()
        assert gate.wait(20)
        return "finished"

    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    task_id = node.enqueue(type="e2e", queue="drain", json={}, max_retry=3, retention="1h")["id"]
    try:
        assert began.wait(15), node.output()[-2000:]
        node.signal(signal.SIGTERM)
        time.sleep(0.5)  # the drain has begun: with the old rule the task was already given back
        gate.set()
        assert node.proc.wait(30) == 0, node.output()[-3000:]
    finally:
        gate.set()
        worker.stop()
        thread.join(15)
    again = cluster.node()
    stored = again.task(task_id)
    assert (stored["state"], stored["retried"], stored["result"]) == ("completed", 0, "finished"), stored
    assert runs == [task_id]
