"""What bench/chaos.py starts and counts: a private PostgreSQL and Redis,
``conveyord`` nodes, SDK workers, producers, and the audit at the end.

Nothing here touches the machine's own PostgreSQL or Redis: the server is
``initdb``'d in a temporary directory and listens on a free loopback port,
and so does the ``redis-server``; both are removed when the rig closes.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import urllib3

from bench.common import ROOT, at_rate
from conveyor.sdk import Client
from conveyor.sdk.errors import APIError, ConnectError, NotFound, TransportError

SECRET_KEY = "chaos-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
QUEUE = "chaos"
TERMINAL = ("completed", "archived", "canceled")
GIVE_UP = 180.0  # a producer stops retrying one task after this many seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class PrivatePostgres:
    """A PostgreSQL server of our own: ``initdb`` in a temporary directory, a free port.

    PostgreSQL refuses to run as root, so under root its programs run as the
    ``postgres`` user (who then owns the directory).
    """

    def __init__(self, parent: str | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="conveyor-chaos-pg-", dir=parent))
        self.data = self.dir / "data"
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        settings = {
            "port": self.port,
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.dir}'",
            "max_connections": 200,
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self.start()

    def _run(self, *argv: str) -> None:
        result = subprocess.run(argv, user=self.user, capture_output=True, text=True, cwd=self.dir)
        if result.returncode:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}")

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-t", "60", *args)

    def start(self) -> None:
        self._pg_ctl("start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-m", mode)

    def restart(self, mode: str) -> None:
        self._pg_ctl("restart", "-m", mode)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def terminate_backends(self, database: str) -> int:
        """``pg_terminate_backend`` every session on *database*; how many there were."""
        rows = self.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )
        return rows[0][0]

    def close(self, keep: bool = False) -> None:
        """Stop the server; remove its files unless *keep* (``pg_ctl -D <dir>/data start`` reopens them)."""
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """A ``redis-server`` of our own on a free port, with no persistence: the
    channel layer carries hints (wakes, cancels, events), never tasks."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, 10, "the private redis-server")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()


class Child:
    """A child process whose output goes to a log file, one file per start."""

    def __init__(self, name: str, logs: Path) -> None:
        self.name, self.logs = name, logs
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def log_path(self, start: int) -> Path:
        return self.logs / f"{self.name}.{start}.log"

    def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        self.starts += 1
        with open(self.log_path(self.starts), "w") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()  # type: ignore[union-attr]
            self.proc.wait(10)  # type: ignore[union-attr]

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; SIGKILL when it does not exit in time (returns None then)."""
        if not self.alive:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        try:
            return self.proc.wait(timeout)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()
            return None


class Node(Child):
    """``manage.py conveyord`` on a fixed port, so a restarted node is found where it was."""

    def __init__(self, name: str, logs: Path, env: dict[str, str]) -> None:
        super().__init__(name, logs)
        self.env, self.port = env, free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [sys.executable, "manage.py", "conveyord", "--host", "127.0.0.1", "--port", str(self.port)]
        self.spawn(argv, self.env)
        wait_for(self._listening, 90, f"{self.name} to listen")

    def _listening(self) -> bool:
        if not self.alive:
            raise RuntimeError(f"{self.name} exited:\n{self.log_path(self.starts).read_text()[-3000:]}")
        return "listening on" in self.log_path(self.starts).read_text()


class Worker(Child):
    """An SDK worker process (bench/chaos_worker.py); each start writes its own completion log."""

    def __init__(self, name: str, logs: Path, node: Node, concurrency: int) -> None:
        super().__init__(name, logs)
        self.node, self.concurrency = node, concurrency

    def completion_log(self, start: int) -> Path:
        return self.logs / f"{self.name}.{start}.done"

    def start(self) -> None:
        argv = [sys.executable, str(ROOT / "bench" / "chaos_worker.py"), self.node.url]
        argv += ["--log", str(self.completion_log(self.starts + 1)), "--concurrency", str(self.concurrency)]
        self.spawn(argv, {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})


@dataclass(frozen=True)
class TaskSpec:
    id: str
    type: str  # "chaos" (runs and completes) or "poison" (ends its worker process)
    ms: int
    max_retry: int | None = None


@dataclass
class Tally:
    """What the producers saw."""

    acked: dict[str, TaskSpec] = field(default_factory=dict)
    no_answer: Counter = field(default_factory=Counter)  # sent, connection closed unanswered: by exception
    no_answer_stored: int = 0  # ... and the task was stored all the same
    timeouts: int = 0
    refused: int = 0  # could not connect (node down)
    statuses: Counter = field(default_factory=Counter)  # error answers by status
    gave_up: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)


class Producers:
    """Threads that enqueue tasks with ids over HTTP (the SDK's Client) at a fixed
    rate, each sending every task until it is acknowledged: a node that is down
    is skipped for the next, an error answer is sent again a moment later, and
    a request whose connection closed unanswered is looked up before it is sent
    again (found: it was stored without an answer)."""

    def __init__(self, urls: list[str], tally: Tally, threads: int = 4) -> None:
        self.urls, self.tally, self.threads = urls, tally, threads

    def run(self, tasks: list[TaskSpec], rate: float) -> None:
        workers = [
            threading.Thread(target=self._produce, args=(tasks[i :: self.threads], rate / self.threads, i), daemon=True)
            for i in range(self.threads)
        ]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()

    def _produce(self, tasks: list[TaskSpec], rate: float, first: int) -> None:
        clients = [Client(url, timeout=15) for url in self.urls]
        at = [first % len(clients)]
        try:
            at_rate(len(tasks), rate, lambda i: self._send(tasks[i], clients, at))
        finally:
            for client in clients:
                client.close()

    def _send(self, spec: TaskSpec, clients: list[Client], at: list[int]) -> None:
        deadline = time.monotonic() + GIVE_UP
        while time.monotonic() < deadline:
            client = clients[at[0] % len(clients)]
            try:
                client.enqueue(
                    spec.type, {"ms": spec.ms}, id=spec.id, queue=QUEUE, max_retry=spec.max_retry, retention=3600
                )
            except ConnectError:
                self.tally.add("refused")
                at[0] += 1
                time.sleep(0.05)
                continue
            except TransportError as exc:
                if isinstance(exc.__cause__, urllib3.exceptions.TimeoutError):
                    self.tally.add("timeouts")
                    continue  # sent again under the same id: stored once either way
                with self.tally.lock:
                    self.tally.no_answer[type(exc.__cause__).__name__] += 1
                if self._stored(spec.id, clients, at, deadline):
                    self.tally.add("no_answer_stored")
                    break
                continue
            except APIError as exc:
                with self.tally.lock:
                    self.tally.statuses[exc.status] += 1
                time.sleep(0.2)
                continue
            break
        else:
            self.tally.gave_up.append(spec.id)
            return
        with self.tally.lock:
            self.tally.acked[spec.id] = spec

    def _stored(self, task_id: str, clients: list[Client], at: list[int], deadline: float) -> bool:
        while time.monotonic() < deadline:
            try:
                clients[at[0] % len(clients)].get_task(task_id)
                return True
            except NotFound:
                return False
            except (TransportError, APIError):
                at[0] += 1
                time.sleep(0.1)
        return False


@contextlib.contextmanager
def private_database(name: str) -> Iterator[str]:
    """A PostgreSQL of its own (on /dev/shm where there is one) holding database
    *name*, migrated by this checkout, with this process's Django pointed at
    it; yields its URL and removes the server at the end."""
    pg = PrivatePostgres(parent="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        pg.execute(f"CREATE DATABASE {name}")
        url = pg.url(name)
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "conveyor_site.settings"}
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        os.environ.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="conveyor_site.settings")
        yield url
    finally:
        pg.close()


def make_tasks(count: int, poison: int = 0, innocent_max_retry: int | None = None) -> list[TaskSpec]:
    """*count* tasks, *poison* of them poison (spread evenly through the run).

    Most take 5-40 ms; one in twenty takes 0.5-2 s, so that a fault always
    meets tasks in flight.
    """
    rng = random.Random(count)

    def ms() -> int:
        return rng.randint(500, 2000) if rng.random() < 0.05 else rng.randint(5, 40)

    tasks = [TaskSpec(uuid.uuid4().hex, "chaos", ms(), innocent_max_retry) for _ in range(count)]
    for k in range(poison):
        tasks[(k + 1) * count // (poison + 1)] = TaskSpec(uuid.uuid4().hex, "poison", 0)
    return tasks


@dataclass
class Execution:
    event: str
    attempt: int
    pid: int
    t: float
    lease: str


def read_completion_logs(paths: Iterable[Path]) -> dict[str, list[Execution]]:
    out: dict[str, list[Execution]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 6:  # a line is written whole or not at all (one write each)
                event, task_id, attempt, pid, t, lease = parts
                out.setdefault(task_id, []).append(Execution(event, int(attempt), int(pid), float(t), lease))
    return out


def task_states(database_url: str, ids: list[str]) -> dict[str, str]:
    states: dict[str, str] = {}
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        for at in range(0, len(ids), 5000):
            rows = conn.execute("SELECT id, state FROM conveyor_task WHERE id = ANY(%s)", (ids[at : at + 5000],))
            states.update(rows.fetchall())
    return states


def held_by(database_url: str, pid: int) -> list[str]:
    """The tasks a node (by its process id, part of its node id) holds leases on."""
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT id FROM conveyor_task WHERE state = 'active' AND lease_holder LIKE %s", (f"%-{pid}-%",)
        )
        return [row[0] for row in rows]
