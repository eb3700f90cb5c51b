"""procrastinate on PostgreSQL, for bench/compare.py (see bench/peers/driver.py).

Variant ``async``: one ``procrastinate worker --concurrency SLOTS``. Bulk:
``batch_defer``. Its database is ``BENCH_PROCRASTINATE_DB``
(procrastinate_compare). Runs inside bench/.peers (``make bench-peers``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.common import PG_ADMIN, vacuum
from bench.peers.driver import COUNTER_URL, System, main, popen

NAME = os.environ.get("BENCH_PROCRASTINATE_DB", "procrastinate_compare")
DB = PG_ADMIN.rsplit("/", 1)[0] + "/" + NAME
WORKDIR = os.path.join("/tmp", f"procbench-{NAME}")
PREFIX = "procbench"

APP = """
import sys
sys.path.insert(0, {root!r})
import procrastinate
from bench.peers.driver import count_done
import redis
counter = redis.Redis.from_url({counter!r})
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo={db!r}))

@app.task(name="noop", queue="bench")
def noop(sent=None):
    count_done(counter, {prefix!r}, sent)
"""


class Procrastinate(System):
    prefix = PREFIX

    def __init__(self) -> None:
        self._app: Any = None

    @property
    def procapp(self) -> Any:
        if self._app is None:
            sys.path.insert(0, WORKDIR)
            import procapp

            self._app = procapp
        return self._app

    def setup(self) -> None:
        """A new database with procrastinate's schema, and the app module on it."""
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {NAME}")
        os.makedirs(WORKDIR, exist_ok=True)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(WORKDIR, "procapp.py"), "w") as f:
            f.write(APP.format(root=root, counter=COUNTER_URL, db=DB, prefix=PREFIX))
        subprocess.run(
            [sys.executable, "-m", "procrastinate", "--app=procapp.app", "schema", "--apply"],
            env={**os.environ, "PYTHONPATH": WORKDIR},
            check=True,
            capture_output=True,
        )

    def reset(self) -> None:
        with psycopg.connect(DB, autocommit=True) as conn:
            conn.execute("TRUNCATE procrastinate_jobs CASCADE")
        vacuum(DB)  # autovacuum's part, as for Conveyor (bench.common.vacuum)

    @contextlib.contextmanager
    def opened(self) -> Iterator[None]:
        with self.procapp.app.open():
            yield

    def enqueue(self, sent: float | None = None) -> None:
        if sent is None:
            self.procapp.noop.defer()
        else:
            self.procapp.noop.defer(sent=sent)

    def enqueue_bulk(self, count: int) -> None:
        self.procapp.noop.batch_defer(*[{} for _ in range(count)])

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if variant != "async":
            raise SystemExit(f"procrastinate: unknown variant {variant!r}")
        argv = [sys.executable, "-m", "procrastinate", "--app=procapp.app", "worker"]
        return popen([*argv, "--concurrency", str(slots), "--queues", "bench"], {"PYTHONPATH": WORKDIR})


if __name__ == "__main__":
    main(Procrastinate())
