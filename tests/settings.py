"""Test settings: SQLite as ``default`` plus PostgreSQL as ``postgres``.

The broker conformance suite runs against both aliases. PostgreSQL comes
from ``TEST_DATABASE_URL`` (default: the local trust-auth server); when it
does not answer, the alias is left out and Postgres tests are skipped with
the reason, unless ``CONVEYOR_REQUIRE_SERVICES=1`` (CI), which fails instead.
"""

from __future__ import annotations

import os

from conveyor_site.dburl import parse_database_url, sqlite_config
from conveyor_site.settings import *
from conveyor_site.settings import BASE_DIR, VAR_DIR
from tests.django_tasks.settings import TASKS  # noqa: F401 (the queues the test tasks use)
from tests.services import postgres_problem

TEST_DATABASE_URL = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
POSTGRES_PROBLEM = postgres_problem(TEST_DATABASE_URL)

# Each test run gets its own databases, so two runs on one machine (a
# developer and CI, or two terminals) never share a file or a schema.
RUN = os.environ.get("CONVEYOR_TEST_RUN_ID") or str(os.getpid())
DATABASES = {"default": sqlite_config(VAR_DIR / "tests" / f"conveyor-{RUN}.sqlite3")}
if POSTGRES_PROBLEM is None:
    DATABASES["postgres"] = parse_database_url(TEST_DATABASE_URL, BASE_DIR)
    DATABASES["postgres"]["TEST"] = {"NAME": f"test_conveyor_{RUN}"}

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The two performance switches (conveyor/conf.py) can be flipped for a whole
# run, as CI does for the store conformance part: CONVEYOR_PREPARED_STATEMENTS=0,
# CONVEYOR_LEASE_ASYNC_COMMIT=0. Everything else starts from the defaults.
CONVEYOR = {
    name: os.environ[f"CONVEYOR_{name}"]
    for name in ("PREPARED_STATEMENTS", "LEASE_ASYNC_COMMIT")
    if f"CONVEYOR_{name}" in os.environ
}
