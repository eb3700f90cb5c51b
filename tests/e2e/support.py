"""Real processes for end-to-end tests: conveyord nodes and SDK workers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (http://\S+)")


def wait_for(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    """Poll *predicate* until it returns something truthy; fail after *timeout*."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Process:
    """A child process whose output is collected by a reader thread."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str, *, cwd: Path = ROOT) -> None:
        self.name = name
        self.env = env
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s of SIGTERM:\n{self.output()[-3000:]}"
            ) from None


class NodeProcess(Process):
    def __init__(self, env: dict[str, str], *, dev: bool, name: str = "node", python: str = sys.executable,
                 project: Path = ROOT) -> None:  # fmt: skip
        """``conveyord`` of *project* (this checkout by default) run by *python*."""
        argv = [python, "manage.py", "conveyord", "--port", "0"] + (["--dev"] if dev else [])
        super().__init__(argv, env, name, cwd=project)
        self.url = ""
        try:
            self.url = wait_for(self._listening, timeout=60, what=f"{name} to listen")
        except AssertionError:
            self.kill()
            raise AssertionError(f"{name} did not start:\n{self.output()[-4000:]}") from None
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def _listening(self) -> str | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.output()[-4000:]}")
        for line in self.lines:
            match = LISTENING.search(line)
            if match:
                return match.group(1)
        return None

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        assert response.status_code < 400, f"{method} {path} -> {response.status_code}: {response.text}"
        return response.json() if response.content else None

    def task(self, task_id: str) -> dict[str, Any]:
        return self.api("GET", f"/api/v1/tasks/{task_id}")

    def enqueue(self, **body: Any) -> dict[str, Any]:
        body.setdefault("type", "e2e")
        return self.api("POST", "/api/v1/tasks", json=body)


class WorkerProcess(Process):
    def __init__(self, url: str, env: dict[str, str], log: Path, *, name: str = "worker", **options: Any) -> None:
        argv = [sys.executable, str(ROOT / "tests" / "e2e" / "worker_app.py"), "--url", url, "--log", str(log)]
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        super().__init__(argv, env, name)
        self.log = log

    def events(self) -> list[dict[str, Any]]:
        return read_events([self.log])

    def wait_connected(self, node: NodeProcess, count: int = 1, timeout: float = 20.0) -> None:
        wait_for(lambda: len(node.api("GET", "/api/v1/workers")["workers"]) >= count, timeout, what="worker session")


class Supervisor:
    """Keeps *count* SDK worker processes of *cluster* running on *node*: one
    that exits is started again, as systemd or Kubernetes would start it."""

    def __init__(self, cluster: Any, node: NodeProcess, count: int, **options: Any) -> None:
        self.cluster, self.node, self.options = cluster, node, options
        self.running = [cluster.worker(node, **options) for _ in range(count)]
        self.restarts = 0

    def check(self) -> None:
        """Start a new worker in place of each one that has exited."""
        for i, worker in enumerate(self.running):
            if worker.proc.poll() is not None:
                self.running[i] = self.cluster.worker(self.node, **self.options)
                self.restarts += 1


def complete_lines(path: Path) -> list[str]:
    """The lines a writer has finished (a line still being written is left out)."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")
    return [line for line in lines[:-1] if line.strip()]  # the last piece has no newline yet


def read_events(logs: list[Path]) -> list[dict[str, Any]]:
    out = []
    for log in logs:
        out.extend(json.loads(line) for line in complete_lines(log))
    return sorted(out, key=lambda e: e["t"])


def max_overlap(events: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any] = lambda e: None) -> dict[Any, int]:
    """Largest number of tasks running at once, per key, from start/done events."""
    running: dict[Any, int] = {}
    peak: dict[Any, int] = {}
    for e in sorted(events, key=lambda e: (e["t"], e["event"] != "done")):
        k = key(e)
        if e["event"] == "start":
            running[k] = running.get(k, 0) + 1
            peak[k] = max(peak.get(k, 0), running[k])
        elif e["event"] in ("done", "cancelled"):
            running[k] = running.get(k, 0) - 1
    return peak
