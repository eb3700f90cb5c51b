"""Webhook workers end to end: a real node delivering to the real example endpoint."""

from __future__ import annotations

import itertools
import json
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import ROOT, Process, complete_lines, max_overlap, wait_for
from tests.e2e.test_dispatch import wait_state

FAST = {"reaper_interval": 0.5}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Endpoint(Process):
    """examples/webhook_endpoint.py as a child process."""

    def __init__(self, tmp: Path, conveyor_url: str, *, secrets: str = "", port: int | None = None) -> None:
        self.port = port or free_port()
        self.log = tmp / f"endpoint-{self.port}-{time.monotonic_ns()}.jsonl"
        env = {"PATH": "/usr/bin:/bin", "WEBHOOK_SECRET": secrets, "PYTHONUNBUFFERED": "1"}
        argv = [
            sys.executable,
            str(ROOT / "examples" / "webhook_endpoint.py"),
            "--port",
            str(self.port),
            "--conveyor",
            conveyor_url,
            "--log",
            str(self.log),
        ]
        super().__init__(argv, env, "endpoint")
        wait_for(lambda: any("listening" in line for line in self.lines), 10, what="endpoint to listen")
        self.url = f"http://127.0.0.1:{self.port}/tasks"

    def events(self, kind: str | None = None) -> list[dict]:
        events = [json.loads(line) for line in complete_lines(self.log)]
        return [e for e in events if kind is None or e["event"] == kind]


@pytest.fixture
def endpoints(cluster, tmp_path):
    started: list[Endpoint] = []

    def start(node, **kwargs) -> Endpoint:
        endpoint = Endpoint(tmp_path, node.url, **kwargs)
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        endpoint.kill()


def register(node, url: str, **fields) -> dict:
    body = {"name": "hooks", "url": url, "queues": {"default": 1}, "concurrency": 4, **fields}
    registration = node.api("POST", "/api/v1/webhooks", json=body)
    return registration


def status(node, name: str = "hooks") -> dict:
    return node.api("GET", f"/api/v1/webhooks/{name}").get("status") or {}


def wait_serving(node, name: str = "hooks") -> None:
    wait_for(lambda: status(node, name), 15, what="webhook gateway status")


def test_sync_delivery_completes_the_task(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node, secrets="s3cret")
    register(node, endpoint.url, secrets=["s3cret"])
    task = node.enqueue(json={"to": "a@b.c"})
    wait_state(node, task["id"], "completed")
    [delivery] = endpoint.events("execute")
    assert delivery["task"] == task["id"] and delivery["attempt"] == 1
    assert endpoint.events("rejected") == []


def test_retryable_error_retries_with_backoff_then_archives(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"fail": True}, max_retry=2, retry_policy={"kind": "fixed", "base": 0.3})
    final = wait_state(node, task["id"], "archived")
    runs = endpoint.events("execute")
    assert [e["attempt"] for e in runs] == [1, 2, 3]
    assert all(b["t"] - a["t"] >= 0.25 for a, b in itertools.pairwise(runs))
    assert final["last_error"] == "retries exhausted: failed on purpose"


def test_permanent_error_archives_without_retry(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"skip": True}, max_retry=5)
    final = wait_state(node, task["id"], "archived")
    assert len(endpoint.events("execute")) == 1
    assert final["last_error"] == "permanent failure"


def test_accepted_task_kept_alive_by_heartbeats_then_reported(cluster, endpoints):
    node = cluster.node(lease_ttl=2.5, **FAST)
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"async": 8}, retention=60)  # > 3 x the lease TTL; kept once completed
    final = wait_state(node, task["id"], "completed", 30)
    assert final["attempt"] == 1
    assert len(endpoint.events("execute")) == 1
    assert len(endpoint.events("heartbeat")) >= 6
    assert all(e["answer"] == {} for e in endpoint.events("heartbeat"))  # WebhookHeartbeatResponse is empty


def test_accepted_then_silent_task_is_reclaimed_after_lease_expiry(cluster, endpoints):
    node = cluster.node(lease_ttl=1, **FAST)
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"silent": True}, max_retry=1, retry_policy={"kind": "fixed", "base": 0.1})
    final = wait_state(node, task["id"], "archived", 30)
    assert [e["attempt"] for e in endpoint.events("execute")] == [1, 2]
    assert final["last_error"] == "retries exhausted: lease expired"


def test_cancel_aborts_a_synchronous_delivery(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"sleep": 20})
    wait_for(lambda: endpoint.events("execute"), 10, what="delivery")
    node.api("POST", f"/api/v1/tasks/{task['id']}/cancel")
    final = wait_state(node, task["id"], "archived", 10)  # long before the 20 s sleep ends
    assert final["last_error"].startswith("canceled while running")


def test_cancel_of_an_accepted_task_sends_a_cancel_notification(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"async": 30})
    wait_for(lambda: endpoint.events("execute"), 10, what="delivery")
    node.api("POST", f"/api/v1/tasks/{task['id']}/cancel")
    wait_for(lambda: endpoint.events("cancel"), 10, what="cancel notification")
    final = wait_state(node, task["id"], "archived", 20)
    assert endpoint.events("cancel")[0]["task"] == task["id"]
    assert final["last_error"].startswith("canceled while running")


def test_group_batch_members_resolve_individually(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url, batch_types=["report"])
    node.api(
        "PUT", "/api/v1/groups", json={"queue": "default", "group": "g", "max_size": 4, "max_delay": 60, "grace": 60}
    )
    specs = [{}, {"fail": True}, {"skip": True}, {"async": 1}]
    tasks = node.api(
        "POST",
        "/api/v1/tasks/tx",
        json={"tasks": [{"type": "report", "group": "g", "max_retry": 0, "json": s} for s in specs]},
    )["tasks"]
    ok, failed, skipped, accepted = (t["id"] for t in tasks)
    wait_state(node, ok, "completed")
    wait_state(node, accepted, "completed")
    assert wait_state(node, failed, "archived")["last_error"] == "retries exhausted: failed on purpose"
    assert wait_state(node, skipped, "archived")["last_error"] == "permanent failure"
    assert {e["batch"] for e in endpoint.events("execute")} == {4}  # one POST carried all four
    assert {e["id"] for e in endpoint.events("execute")} == {ok, failed, skipped, accepted}


def test_signatures_verify_across_secret_rotation(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node, secrets="new,old")
    register(node, endpoint.url, secrets=["old"])
    first = node.enqueue(json={})
    wait_state(node, first["id"], "completed")
    register(node, endpoint.url, secrets=["new", "old"])  # rotate: sign with the newest
    time.sleep(1.5)  # the gateway restarts with the new secrets
    second = node.enqueue(json={})
    wait_state(node, second["id"], "completed")
    assert endpoint.events("rejected") == []


def test_endpoint_rejects_a_tampered_body(cluster, endpoints):
    from conveyor.webhooks.signing import signed_headers

    node = cluster.node()
    endpoint = endpoints(node, secrets="s3cret")
    body = json.dumps(
        {"jsonrpc": "2.0", "id": "1", "method": "conveyor.task.execute", "params": {"taskId": "t"}}
    ).encode()
    headers = signed_headers(["s3cret"], body)
    tampered = body.replace(b'"t"', b'"u"')
    assert httpx.post(endpoint.url, content=tampered, headers=headers).status_code == 401
    assert httpx.post(endpoint.url, content=body, headers=headers).status_code == 200


def test_wrong_secret_is_a_transport_failure(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node, secrets="endpoint-secret")
    register(node, endpoint.url, secrets=["server-secret"])
    task = node.enqueue(json={}, max_retry=5)
    wait_for(lambda: node.task(task["id"])["retried"] >= 1, 10, what="a failed attempt")
    assert node.task(task["id"])["last_error"] == "transport: HTTP 401"
    assert endpoint.events("rejected")


def test_breaker_opens_on_a_dead_endpoint_and_closes_when_it_returns(cluster, endpoints):
    node = cluster.node()
    port = free_port()
    register(node, f"http://127.0.0.1:{port}/tasks")
    ids = [
        t["task"]["id"]
        for t in node.api(
            "POST", "/api/v1/tasks/batch", json={"tasks": [{"type": "e2e", "json": {}} for _ in range(10)]}
        )["results"]
    ]
    wait_serving(node)
    wait_for(lambda: status(node).get("breaker") in ("open", "probing"), 15, what="breaker open")
    time.sleep(1.0)
    states = [node.task(i) for i in ids]
    burned = sum(t["retried"] for t in states)
    assert sum(t["state"] in ("pending", "retry") for t in states) == 10
    assert burned <= 6  # the failures that opened it, plus a probe or two, not 10 x retries
    endpoint = endpoints(node, port=port)
    for task_id in ids:
        wait_state(node, task_id, "completed", 60)
    wait_for(lambda: status(node).get("breaker") == "closed", 10, what="breaker closed")
    assert len(endpoint.events("execute")) == 10


def test_concurrency_is_never_exceeded(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url, concurrency=3)
    node.api(
        "POST", "/api/v1/tasks/batch", json={"tasks": [{"type": "e2e", "json": {"sleep": 0.2}} for _ in range(15)]}
    )
    wait_for(lambda: len(endpoint.events("completed")) == 15, 60, what="15 completions")
    events = [
        {**e, "event": "start" if e["event"] == "execute" else "done"}
        for e in endpoint.events()
        if e["event"] in ("execute", "completed")
    ]
    assert max_overlap(events)[None] == 3


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_target_guard_refuses_loopback_when_private_targets_are_off(cluster, endpoints, host):
    node = cluster.node(webhooks_allow_private_targets=0)
    endpoint = endpoints(node)
    register(node, f"http://{host}:{endpoint.port}/tasks")
    task = node.enqueue(json={}, max_retry=5)
    wait_for(lambda: node.task(task["id"])["retried"] >= 1, 10, what="a refused attempt")
    assert "loopback" in node.task(task["id"])["last_error"]
    wait_for(lambda: "loopback" in status(node).get("last_error", ""), 10, what="status shows why")
    assert endpoint.events() == []


def test_redirects_are_not_followed(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node)
    register(node, endpoint.url)
    task = node.enqueue(json={"redirect": True}, max_retry=3)
    wait_for(lambda: node.task(task["id"])["retried"] >= 1, 10, what="a failed attempt")
    assert node.task(task["id"])["last_error"] == "transport: HTTP 302 (redirects are not followed)"


@pytest.mark.parametrize("mode", ["dev"])
def test_quick_start_of_the_webhook_document(cluster, endpoints):
    node = cluster.node()
    endpoint = endpoints(node, secrets="s3cret")
    # conveyor webhooks add demo-hooks http://localhost:9090/tasks --queue email=1 --secret s3cret
    node.api(
        "POST",
        "/api/v1/webhooks",
        json={
            "name": "demo-hooks",
            "url": f"http://localhost:{endpoint.port}/tasks",
            "queues": {"email": 1},
            "secrets": ["s3cret"],
        },
    )
    response = httpx.post(
        f"{node.url}/conveyor.v1.TaskService/Enqueue",
        headers={"Content-Type": "application/json"},
        content='{"queue":"email","type":"email:send","payload":"eyJ0byI6ImFAYi5jIn0=","contentType":"application/json"}',
    )
    assert response.status_code == 200
    task_id = response.json()["task"]["id"]
    wait_state(node, task_id, "completed")
    assert endpoint.events("execute")[0]["type"] == "email:send"
