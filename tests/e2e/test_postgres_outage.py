"""Enqueues while PostgreSQL is down: a JSON 503 with ``Retry-After``, and the node serves again once it is back.

The test stops a PostgreSQL server of its own (``initdb`` in a temporary
directory, a free port), never the shared one.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import base_env
from tests.e2e.support import ROOT, NodeProcess, wait_for

pytestmark = pytest.mark.slow


class PrivatePostgres:
    """``initdb`` in a temporary directory, on a free loopback port; under root its programs run as ``postgres``."""

    def __init__(self) -> None:
        if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
            pytest.skip("initdb / pg_ctl are not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="conveyor-outage-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.run("initdb", "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust", "--no-sync")
        with open(self.dir / "data" / "postgresql.conf", "a") as conf:
            conf.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.dir}'\n")
        self.start()

    def run(self, *argv: str) -> None:
        result = subprocess.run(argv, user=self.user, capture_output=True, text=True, cwd=self.dir)
        assert result.returncode == 0, f"{' '.join(argv)}: {result.stdout}{result.stderr}"

    def pg_ctl(self, *args: str) -> None:
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w", *args)

    def start(self) -> None:
        self.pg_ctl("start")

    def stop(self) -> None:
        self.pg_ctl("stop", "-m", "fast")

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        subprocess.run(["pg_ctl", "-D", str(self.dir / "data"), "stop", "-m", "immediate"], user=self.user,
                       capture_output=True)  # fmt: skip
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    yield pg
    pg.close()


@pytest.fixture
def node(postgres: PrivatePostgres, redis_url: str) -> Iterator[NodeProcess]:
    import psycopg

    with psycopg.connect(postgres.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE conveyor")
    env = {**base_env(), "DATABASE_URL": postgres.url("conveyor"), "REDIS_URL": redis_url,
           "CONVEYOR_CHANNEL_PREFIX": f"outage{uuid.uuid4().hex[:8]}", "CONVEYOR_ALLOW_UNAUTHENTICATED": "1"}  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    proc = NodeProcess(env, dev=False, name="outage-node")
    yield proc
    proc.kill()


ENQUEUES = [
    ("/api/v1/tasks", {"type": "outage", "queue": "outage"}),  # the fast path: the node's own connections
    ("/api/v1/tasks", {"type": "outage", "queue": "outage", "unique_key": "u1"}),  # through Django's
    ("/api/v1/tasks/batch", {"tasks": [{"type": "outage", "queue": "outage"}]}),
    ("/api/v1/tasks/tx", {"tasks": [{"type": "outage", "queue": "outage"}]}),
    ("/conveyor.v1.TaskService/Enqueue", {"type": "outage", "queue": "outage"}),
]


def test_enqueues_during_a_postgres_outage_get_a_json_503_with_retry_after(node, postgres):
    before = node.enqueue(queue="outage")
    postgres.stop()

    for path, body in ENQUEUES:
        response = httpx.post(node.url + path, json=body, timeout=60)
        assert response.status_code == 503, (path, response.status_code, response.text[:300])
        assert response.headers["content-type"].startswith("application/json"), (path, response.text[:300])
        assert int(response.headers["retry-after"]) > 0, path
        code = response.json().get("error") or response.json().get("code")
        assert code == "unavailable" and "database is unavailable" in response.json()["message"], response.text
    listing = httpx.get(node.url + "/api/v1/tasks?queue=outage", timeout=60)
    assert listing.status_code == 503 and listing.json()["error"] == "unavailable", listing.text

    postgres.start()
    # The node serves again without a restart, and nothing refused was stored.
    after = wait_for(lambda: _enqueued(node), 60, 0.5, what="enqueues after PostgreSQL is back")
    ids = {t["id"] for t in node.api("GET", "/api/v1/tasks?queue=outage")["tasks"]}
    assert ids == {before["id"], after["id"]}
    assert node.proc.poll() is None


def _enqueued(node: NodeProcess) -> dict | None:
    response = httpx.post(node.url + "/api/v1/tasks", json={"type": "outage", "queue": "outage"}, timeout=60)
    return response.json() if response.status_code == 201 else None
