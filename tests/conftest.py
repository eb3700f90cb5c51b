"""Fixtures shared by every test: clocks, brokers over both databases."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from conveyor.broker import Broker
from conveyor.broker.hooks import RecordingHooks
from conveyor.clock import FakeClock

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


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def hooks() -> RecordingHooks:
    return RecordingHooks()


@pytest.fixture(params=DB_ALIASES, ids=lambda a: DB_IDS[a])
def db_alias(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        skip_without_postgres()
    return request.param


@pytest.fixture
def broker(db_alias: str, clock: FakeClock, hooks: RecordingHooks) -> Broker:
    """A broker on one database with a fake clock; tables are emptied after."""
    return Broker(clock=clock, using=db_alias, hooks=hooks)
