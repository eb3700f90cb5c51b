"""Run a real Conveyor node on an ephemeral loopback port, for tests and small apps.

    from conveyor import embedded

    with embedded.start() as node:          # SQLite in a temp dir, auth off
        client = node.client()
        worker = node.worker(queues={"default": 1}, concurrency=4)
        ...

The node is a child process running ``manage.py conveyord --dev --port 0``
(the same code as any node); ``database_url`` may point at PostgreSQL for a
durable embedded node. It is a single node: not highly available.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from conveyor.sdk import AsyncClient, AsyncWorker, Client, Worker

PROJECT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (http://\S+)")


class EmbeddedNode:
    def __init__(self, process: subprocess.Popen[str], url: str, directory: str | None) -> None:
        self.process = process
        self.url = url
        self._directory = directory
        self._clients: list[Any] = []

    def client(self) -> Client:
        client = Client(self.url)
        self._clients.append(client)
        return client

    def async_client(self) -> AsyncClient:
        return AsyncClient(self.url)

    def worker(self, **options: Any) -> Worker:
        return Worker(self.url, **options)

    def async_worker(self, **options: Any) -> AsyncWorker:
        return AsyncWorker(self.url, **options)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (drain), then SIGKILL if it does not exit in time."""
        for client in self._clients:
            client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> EmbeddedNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(database_url: str | None = None, *, env: dict[str, str] | None = None, timeout: float = 60.0) -> EmbeddedNode:
    """Start a node and wait until it listens; return its handle."""
    directory = None
    if database_url is None:
        directory = tempfile.mkdtemp(prefix="conveyor-embedded-")
        database_url = f"sqlite:///{directory}/conveyor.sqlite3"
    # A clean node: no Redis, no tokens from this process's environment
    # (pass them in *env* to test auth).
    child_env = {
        k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE", "CONVEYOR_API_TOKENS")
    }
    child_env.update(
        {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "conveyor_site.settings", "PYTHONUNBUFFERED": "1"}
    )
    child_env.update(env or {})
    process = subprocess.Popen(
        [sys.executable, str(PROJECT / "manage.py"), "conveyord", "--dev", "--port", "0"],
        cwd=PROJECT,
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = _wait_for_url(process, timeout)
    return EmbeddedNode(process, url, directory)


def _wait_for_url(process: subprocess.Popen[str], timeout: float) -> str:
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = LISTENING.search(line)
            if match and not found:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the embedded node did not start:\n" + "".join(lines[-40:]))
        time.sleep(0.02)
    return found[0]
