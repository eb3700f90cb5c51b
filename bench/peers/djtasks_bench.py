"""django-tasks-db (the database backend of Django's tasks framework) on
PostgreSQL, for bench/compare.py (see bench/peers/driver.py).

Variant ``procs``: SLOTS ``manage.py db_worker`` processes (each runs one
task at a time), no start-up delay, each polling every SLOTS /
``BENCH_DJTASKS_POLLS`` seconds when idle: the pool polls 50 times a second
whatever its size, as often as tasks come in the latency run (0.04 s at
2 slots; 1 s at 50, the command's default). Its database is
``BENCH_DJTASKS_DB`` (djtasks_compare). It has no bulk enqueue. Runs inside
bench/.peers (``make bench-peers``).

    python bench/peers/djtasks_bench.py pool SLOTS   # the worker processes, until SIGTERM
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.peers.djtasks_settings")

from bench.common import PG_ADMIN, vacuum
from bench.peers.driver import System, main, popen

POLLS = float(os.environ.get("BENCH_DJTASKS_POLLS", "50"))  # a second, the whole pool's, when idle


def database_url() -> str:
    from django.conf import settings

    return PG_ADMIN.rsplit("/", 1)[0] + "/" + settings.DATABASES["default"]["NAME"]


class DjangoTasks(System):
    prefix = "djtasksbench"
    has_bulk = False

    def __init__(self) -> None:
        import django

        django.setup()

    def setup(self) -> None:
        import psycopg
        from django.conf import settings
        from django.core.management import call_command

        name = settings.DATABASES["default"]["NAME"]
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        call_command("migrate", verbosity=0)

    def reset(self) -> None:
        from django.db import connection
        from django_tasks_db.models import DBTaskResult

        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {DBTaskResult._meta.db_table}")
        connection.close()
        vacuum(database_url())

    def enqueue(self, sent: float | None = None) -> None:
        from bench.peers.djtasks_app import noop

        noop.enqueue(sent)

    def worker(self, slots: int, variant: str) -> subprocess.Popen:
        if variant != "procs":
            raise SystemExit(f"django-tasks: unknown variant {variant!r}")
        return popen([sys.executable, os.path.abspath(__file__), "pool", str(slots)])


def pool(slots: int) -> None:
    interval = f"{slots / POLLS:g}"
    argv = [sys.executable, "-m", "django", "db_worker", "--interval", interval, "--no-startup-delay", "-v0"]
    procs = [subprocess.Popen(argv) for _ in range(slots)]
    signal.signal(signal.SIGTERM, lambda *_: [p.terminate() for p in procs])
    for p in procs:
        p.wait()


if __name__ == "__main__":
    if sys.argv[1] == "pool":
        pool(int(sys.argv[2]))
    else:
        main(DjangoTasks())
