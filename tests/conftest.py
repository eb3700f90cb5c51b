"""Fixtures shared by every test: clocks, brokers over both databases."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from conveyor.broker import Broker
from conveyor.clock import FakeClock
from conveyor.notify.hooks import RecordingHooks

DB_ALIASES = ["default", "postgres"]
DB_IDS = {"default": "sqlite", "postgres": "postgres"}


def require_services() -> bool:
    return os.environ.get("CONVEYOR_REQUIRE_SERVICES") == "1"


def pytest_configure(config: pytest.Config) -> None:
    problem = getattr(settings, "POSTGRES_PROBLEM", None)
    if problem and require_services():
        raise pytest.UsageError(f"CONVEYOR_REQUIRE_SERVICES=1 but {problem}")


def skip_without_postgres() -> None:
    problem = getattr(settings, "POSTGRES_PROBLEM", None)
    if problem:
        pytest.skip(f"PostgreSQL tests skipped: {problem}")


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's setup, plus the databases that `db_alias` tests need.

    pytest-django creates test databases for the aliases named in
    ``django_db`` markers; the conformance suites take their database from
    the parametrized ``db_alias`` fixture instead, so add those aliases.
    """
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _get_databases_for_setup

    aliases, serialized = _get_databases_for_setup(request.session.items)
    if any("db_alias" in getattr(item, "fixturenames", ()) for item in request.session.items):
        aliases |= {alias for alias in DB_ALIASES if alias in settings.DATABASES}
    keep = django_db_keepdb and not django_db_createdb
    with django_db_blocker.unblock():
        config = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            aliases=aliases,
            serialized_aliases=serialized,
            keepdb=keep,
        )
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(config, verbosity=request.config.option.verbose)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def hooks() -> RecordingHooks:
    return RecordingHooks()


@pytest.fixture(params=DB_ALIASES, ids=lambda a: DB_IDS[a])
def db_alias(request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """One database per test run of a conformance test, emptied afterwards.

    Tests run in autocommit, as the broker does in production (commit hooks
    fire, threads see each other's commits). Instead of pytest-django's
    flush of every table of every database (which also rebuilds content
    types and permissions), only Conveyor's tables of this one database are
    emptied: the suites run several times faster.
    """
    if request.param == "postgres":
        skip_without_postgres()
    with django_db_blocker.unblock():
        yield request.param
        empty_tables(request.param)


def empty_tables(alias: str) -> None:
    from django.apps import apps
    from django.db import connections

    models = [m for m in apps.get_app_config("conveyor").get_models()]
    # Children first: dependency edges before tasks, sessions before nodes.
    models.sort(key=lambda m: 0 if m._meta.model_name in ("taskdependency", "workersession") else 1)
    with connections[alias].cursor() as cursor:
        for model in models:
            cursor.execute(f"DELETE FROM {connections[alias].ops.quote_name(model._meta.db_table)}")
    # The queue settings are gone behind the broker's back: so is what it
    # remembered of them (a lease would correct it, but a test may look first).
    from conveyor.broker import lease

    lease._LOCKED_PATH.clear()


@pytest.fixture
def broker(db_alias: str, clock: FakeClock, hooks: RecordingHooks) -> Broker:
    """A broker on one database with a fake clock; tables are emptied after."""
    return Broker(clock=clock, using=db_alias, hooks=hooks)
