"""The API of a real dev node (``conveyord --dev``) with API tokens set.

What only a running node shows: WebSocket close codes as a real client sees
them, the node's own event batching reaching /ws/events and SSE, and its
Prometheus counters.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from tests.e2e.support import ROOT, NodeProcess, wait_for

pytestmark = pytest.mark.slow

TOKEN = "live-node-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    tmp: Path = tmp_path_factory.mktemp("live-node")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="conveyor_site.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        DATABASE_URL=f"sqlite:///{tmp / 'conveyor.sqlite3'}",
        CONVEYOR_VAR_DIR=str(tmp),
        CONVEYOR_API_TOKENS=TOKEN,
    )
    assert sys.executable
    proc = NodeProcess(env, dev=True, name="live-node")
    proc.http.headers.update(AUTH)
    yield proc
    proc.stop()


def ws_url(node: NodeProcess, path: str) -> str:
    return node.url.replace("http://", "ws://") + path


def refused_socket(node: NodeProcess, path: str, headers: dict[str, str]) -> tuple[list[Any], int | None]:
    """Connect; return the messages received before the server closed, and its close code."""
    messages: list[Any] = []
    with ws_connect(ws_url(node, path), additional_headers=headers, open_timeout=10) as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=10)))
        except ConnectionClosed as closed:
            return messages, closed.rcvd.code if closed.rcvd else None
    return messages, None


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no-token", "wrong-token"])
def test_worker_websocket_sends_an_error_frame_then_closes_4401(node, headers):
    messages, code = refused_socket(node, "/ws/worker", headers)
    assert [(m["type"], m["code"]) for m in messages] == [("error", "unauthenticated")]
    assert code == 4401


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no-token", "wrong-token"])
def test_events_websocket_says_why_then_closes_4401(node, headers):
    messages, code = refused_socket(node, "/ws/events", headers)
    assert [m["error"] for m in messages] == ["unauthenticated"]
    assert code == 4401


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/v1/tasks", None),
        ("POST", "/api/v1/tasks", {"type": "x"}),
        ("POST", "/conveyor.v1.TaskService/Enqueue", {"type": "x"}),
        ("POST", "/conveyor.v1.AdminService/ListQueues", {}),
        ("GET", "/api/v1/events", None),
    ],
)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no-token", "wrong-token"])
def test_http_without_a_valid_token_is_401(node, method, path, body, headers):
    response = httpx.request(method, node.url + path, json=body, headers=headers, timeout=10)
    assert response.status_code == 401
    payload = response.json()
    assert payload.get("error", payload.get("code")) == "unauthenticated"


def handshake(node: NodeProcess, path: str, extra: bytes) -> tuple[bytes, bool]:
    """A raw WebSocket upgrade with *extra* header lines: the answer, and whether the node then closed."""
    host, port = node.url.removeprefix("http://").rsplit(":", 1)
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    ).encode()
    answer = b""
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request + extra + b"\r\n")
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            return answer, False
    return answer, True


@pytest.mark.parametrize("path", ["/ws/events", "/ws/worker"])
@pytest.mark.parametrize(
    "extra",
    [b"X-Big: " + b"a" * 9000 + b"\r\n", b"X-Big: " + b"a" * 1_000_000 + b"\r\n",
     b"".join(b"X-%d: v\r\n" % i for i in range(200))],
    ids=["a-9-KiB-header", "a-1-MB-header", "200-headers"],
)  # fmt: skip
def test_a_websocket_handshake_with_headers_too_large_is_answered_431_then_closed(node, path, extra):
    answer, closed = handshake(node, path, extra + f"Authorization: Bearer {TOKEN}\r\n".encode())

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 "), answer[:300]
    assert json.loads(body)["error"] == "invalid_argument" and "too large" in json.loads(body)["message"]
    assert closed


def test_a_websocket_handshake_within_the_limits_is_still_accepted(node):
    answer, _ = handshake(
        node, "/ws/events", b"X-Big: " + b"a" * 8000 + f"\r\nAuthorization: Bearer {TOKEN}\r\n".encode()
    )

    assert answer.startswith(b"HTTP/1.1 101 "), answer[:300]


def test_http_with_the_token_is_served(node):
    task = node.api("POST", "/api/v1/tasks", json={"type": "hello", "queue": "live"})
    assert node.task(task["id"])["type"] == "hello"
    assert (
        node.api("POST", "/conveyor.v1.TaskService/GetTask", json={"id": task["id"]})["task"]["state"]
        == "TASK_STATE_PENDING"
    )


def test_health_probes_answer_without_a_token(node):
    assert httpx.get(node.url + "/healthz").json()["status"] == "ok"
    ready = httpx.get(node.url + "/readyz")
    assert (ready.status_code, ready.json()["checks"]) == (200, {"database": "ok", "channel_layer": "ok"})


def test_node_events_reach_the_websocket_filtered(node):
    with ws_connect(ws_url(node, "/ws/events?queue=ev-mail&type=send"), additional_headers=AUTH) as ws:
        time.sleep(0.2)  # let the consumer join the events group
        match = node.enqueue(type="send", queue="ev-mail")
        node.enqueue(type="send", queue="ev-sms")
        node.enqueue(type="bounce", queue="ev-mail")
        events = json.loads(ws.recv(timeout=10))["events"]
        with pytest.raises(TimeoutError):
            events += json.loads(ws.recv(timeout=1))["events"]
    assert [(e["kind"], e["task_id"], e["queue"], e["type"]) for e in events] == [
        ("enqueued", match["id"], "ev-mail", "send")
    ]


def test_node_events_reach_sse_filtered(node):
    with httpx.stream(
        "GET", node.url + "/api/v1/events?queue=sse-mail&type=send", headers=AUTH, timeout=15
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert next(lines) == ": connected"
        node.enqueue(type="send", queue="sse-sms")
        node.enqueue(type="bounce", queue="sse-mail")
        match = node.enqueue(type="send", queue="sse-mail")
        received = []
        for line in lines:
            if line.startswith(("event:", "data:")):
                received.append(line)
            if len(received) == 2:
                break
    assert received[0] == "event: enqueued"
    event = json.loads(received[1].removeprefix("data: "))
    assert (event["task_id"], event["queue"], event["type"]) == (match["id"], "sse-mail", "send")


def enqueued_total(node: NodeProcess, queue: str) -> float:
    text = httpx.get(node.url + "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "conveyor_tasks_enqueued_total" and sample.labels == {"queue": queue}:
                return sample.value
    return 0.0


def test_metrics_count_enqueues(node):
    assert enqueued_total(node, "metered") == 0
    node.enqueue(type="m", queue="metered")
    node.api("POST", "/api/v1/tasks/batch", json={"tasks": [{"type": "m", "queue": "metered"}] * 2})
    node.api(
        "POST", "/api/v1/tasks", json={"type": "m", "queue": "metered", "process_in": "1h"}
    )  # scheduled, not enqueued
    wait_for(lambda: enqueued_total(node, "metered") >= 3, 10, what="the enqueue counter")
    time.sleep(0.3)
    assert enqueued_total(node, "metered") == 3


@pytest.mark.parametrize("token", [None, "wrong"], ids=["no-token", "wrong-token"])
def test_conveyor_worker_refused_by_auth_prints_one_line_and_exits_non_zero(node, token):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    env.update(DJANGO_SETTINGS_MODULE="conveyor_site.settings", PYTHONPATH=str(ROOT))
    argv = [sys.executable, "manage.py", "conveyor_worker", "--url", node.url]
    argv += ["--token", token] if token else []
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert ("refused the token" if token else "requires authentication") in lines[0]
    assert "CONVEYOR_TOKEN" in lines[0]
