"""Fixtures for end-to-end tests: fresh databases, nodes and workers.

``mode`` is ``dev`` (SQLite file + in-memory layer, ``conveyord --dev``) or
``cluster`` (a fresh PostgreSQL database + Redis, ``conveyord`` without
--dev). Every test gets its own database and channel prefix.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from tests.e2e.support import ROOT, NodeProcess, WorkerProcess
from tests.services import redis_problem

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


def _pg_admin_url() -> str:
    return settings.TEST_DATABASE_URL


def _with_db(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A migrated template database (one per test run); each test copies it (fast)."""
    if settings.POSTGRES_PROBLEM:
        pytest.skip(f"PostgreSQL tests skipped: {settings.POSTGRES_PROBLEM}")
    TEMPLATE = f"conveyor_e2e_template_{settings.RUN}"
    admin = _pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    env = {**os.environ, "DATABASE_URL": _with_db(admin, TEMPLATE), "DJANGO_SETTINGS_MODULE": "conveyor_site.settings"}
    import subprocess

    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    with psycopg.connect(_with_db(admin, TEMPLATE), autocommit=True) as conn:
        conn.execute("CREATE TABLE e2e_executions (task_id text NOT NULL, pid integer NOT NULL)")
    yield TEMPLATE
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")


@pytest.fixture
def pg_database(pg_template: str) -> Iterator[str]:
    name = f"conveyor_e2e_{uuid.uuid4().hex[:10]}"
    admin = _pg_admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    yield _with_db(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def redis_url() -> str:
    problem = redis_problem(REDIS_URL)
    if problem:
        pytest.skip(f"Redis tests skipped: {problem}")
    return REDIS_URL


TEST_SECRET_KEY = "e2e-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
    env["DJANGO_SETTINGS_MODULE"] = "conveyor_site.settings"
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env["DJANGO_SECRET_KEY"] = TEST_SECRET_KEY  # a production node refuses the default one
    return env


def dev_node(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[NodeProcess]:
    """A dev node (`conveyord --dev`) on a SQLite file of its own, *env* added;
    stopped after. For a module's ``node`` fixture: ``yield from dev_node(...)``."""
    tmp = tmp_path_factory.mktemp(name)
    proc = NodeProcess(
        {**base_env(), "DATABASE_URL": f"sqlite:///{tmp}/x.sqlite3", **env}, dev=True, name=f"{name}-node"
    )
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["dev", "cluster"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def node_env(mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    env = base_env()
    if mode == "dev":
        env["DATABASE_URL"] = f"sqlite:///{tmp_path}/conveyor.sqlite3"
    else:
        env["DATABASE_URL"] = request.getfixturevalue("pg_database")
        env["REDIS_URL"] = request.getfixturevalue("redis_url")
        env["CONVEYOR_CHANNEL_PREFIX"] = f"e2e{uuid.uuid4().hex[:8]}"
        env["CONVEYOR_ALLOW_UNAUTHENTICATED"] = "1"
        # Test endpoints listen on loopback (the guard test turns this off).
        env["CONVEYOR_WEBHOOKS_ALLOW_PRIVATE_TARGETS"] = "1"
    return env


class Cluster:
    """Starts nodes and workers for one test; stops them all afterwards."""

    def __init__(self, env: dict[str, str], dev: bool, tmp_path: Path) -> None:
        self.env, self.dev, self.tmp = env, dev, tmp_path
        self.nodes: list[NodeProcess] = []
        self.workers: list[WorkerProcess] = []

    def node(self, **settings_env: Any) -> NodeProcess:
        env = {**self.env, **{f"CONVEYOR_{k.upper()}": str(v) for k, v in settings_env.items()}}
        node = NodeProcess(env, dev=self.dev, name=f"node{len(self.nodes)}")
        self.nodes.append(node)
        return node

    def worker(self, node: NodeProcess, **options: Any) -> WorkerProcess:
        log = self.tmp / f"worker{len(self.workers)}.jsonl"
        worker = WorkerProcess(node.url, base_env(), log, name=f"worker{len(self.workers)}", **options)
        self.workers.append(worker)
        return worker

    def logs(self) -> list[Path]:
        return [w.log for w in self.workers]

    def close(self) -> None:
        for proc in [*self.workers, *self.nodes]:
            if proc.proc.poll() is None:
                proc.kill()


@pytest.fixture
def cluster(node_env: dict[str, str], mode: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(node_env, mode == "dev", tmp_path)
    yield c
    c.close()


@contextlib.contextmanager
def module_node(request: pytest.FixtureRequest, mode: str, tmp: Path, **env: str) -> Iterator[NodeProcess]:
    """One tokenless node for a whole module (dev: SQLite; cluster: a fresh PostgreSQL database + Redis).

    For modules of many small cases against one node, each in queues of its
    own; *env* adds to the node's environment.
    """
    node_env = {**base_env(), **env}
    database = None
    if mode == "dev":
        node_env["DATABASE_URL"] = f"sqlite:///{tmp}/conveyor.sqlite3"
    else:
        template = request.getfixturevalue("pg_template")
        problem = redis_problem(REDIS_URL)
        if problem:
            pytest.skip(f"Redis tests skipped: {problem}")
        database = f"conveyor_e2e_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database} TEMPLATE {template}")
        node_env.update(DATABASE_URL=_with_db(_pg_admin_url(), database), REDIS_URL=REDIS_URL,
                        CONVEYOR_CHANNEL_PREFIX=f"e2e{uuid.uuid4().hex[:8]}", CONVEYOR_ALLOW_UNAUTHENTICATED="1")  # fmt: skip
    node = NodeProcess(node_env, dev=mode == "dev", name=f"{mode}-node")
    try:
        yield node
    finally:
        node.stop()
        if database is not None:
            with psycopg.connect(_pg_admin_url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
