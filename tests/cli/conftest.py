"""CLI tests run the real command against the SQLite test database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conveyor.broker import Broker, get_broker, set_broker


@pytest.fixture(autouse=True)
def fresh_broker() -> Iterator[None]:
    # The CLI uses the process-wide broker; start each test from a new one so
    # cached channel-layer hooks never leak between tests.
    set_broker(None)
    yield
    set_broker(None)


@pytest.fixture
def broker() -> Broker:
    """The broker the CLI itself uses (default database, system clock)."""
    return get_broker()
