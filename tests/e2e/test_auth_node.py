"""A production (non --dev) node and API tokens: it refuses to start without them, and enforces them."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from tests.e2e.conftest import base_env
from tests.e2e.support import ROOT, NodeProcess

pytestmark = pytest.mark.slow

TOKEN = "e2e-node-token"


@pytest.fixture
def production_env(pg_database: str, redis_url: str) -> dict[str, str]:
    """PostgreSQL + Redis, as a non-dev node needs; no tokens, auth not waived."""
    return {**base_env(), "DATABASE_URL": pg_database, "REDIS_URL": redis_url, "CONVEYOR_CHANNEL_PREFIX": "e2eauth"}


def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "manage.py", "conveyord", "--port", "0"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_non_dev_node_without_tokens_refuses_to_start_and_names_the_setting(production_env):
    result = start(production_env)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "refusing to start" in output
    assert "CONVEYOR_API_TOKENS" in output
    assert "CONVEYOR_ALLOW_UNAUTHENTICATED=1" in output  # and says how to run without auth on purpose
    assert "listening on" not in output


@pytest.mark.parametrize("key", [None, "conveyor-dev-insecure-change-me", "django-insecure-" + "x1y2z3" * 10])
def test_a_non_dev_node_refuses_a_default_or_weak_secret_key(production_env, key):
    env = {**production_env, "CONVEYOR_API_TOKENS": TOKEN}
    env.pop("DJANGO_SECRET_KEY")
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    result = start(env)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "refusing to start" in output
    assert "SECRET_KEY is a default or weak key" in output and "DJANGO_SECRET_KEY" in output
    assert "listening on" not in output


def test_a_non_dev_node_runs_the_deployment_checks(production_env):
    node = NodeProcess({**production_env, "CONVEYOR_API_TOKENS": TOKEN}, dev=False, name="deploy-node")
    try:
        # Django's --deploy security warnings (no HSTS, no SSL redirect: this node is plain HTTP).
        assert "(security.W004)" in node.output() and "(security.W008)" in node.output()
    finally:
        node.stop()


def test_a_non_dev_node_with_tokens_answers_401_without_one(production_env):
    node = NodeProcess({**production_env, "CONVEYOR_API_TOKENS": f"{TOKEN},other-token"}, dev=False, name="auth-node")
    try:
        for method, path, body in [("GET", "/api/v1/tasks", None), ("POST", "/api/v1/tasks", {"type": "x"}),
                                   ("POST", "/conveyor.v1.TaskService/Enqueue", {"type": "x"}),
                                   ("POST", "/conveyor.v1.AdminService/ListQueues", {})]:  # fmt: skip
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                response = httpx.request(method, node.url + path, json=body, headers=headers, timeout=10)
                assert response.status_code == 401, (method, path, headers, response.text)
        # Nothing was enqueued by the refused calls; a token is served.
        tasks = httpx.get(node.url + "/api/v1/tasks", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert (tasks.status_code, tasks.json()["tasks"]) == (200, [])
        made = httpx.post(
            node.url + "/api/v1/tasks", json={"type": "x"}, headers={"Authorization": "Bearer other-token"}, timeout=10
        )
        assert made.status_code == 201
        # The worker WebSocket says why, then closes 4401.
        with ws_connect(node.url.replace("http://", "ws://") + "/ws/worker", open_timeout=10) as ws:
            frame = json.loads(ws.recv(timeout=10))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
        assert (frame["type"], frame["code"]) == ("error", "unauthenticated")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    finally:
        assert node.stop() == 0


def test_a_node_whose_port_is_taken_exits_non_zero_and_says_so(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**base_env(), "DATABASE_URL": f"sqlite:///{tmp_path}/conveyor.sqlite3"}
        argv = [sys.executable, "manage.py", "conveyord", "--dev", "--port", str(port)]
        result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"could not listen on 127.0.0.1:{port}" in result.stderr
    assert "--port" in result.stderr
