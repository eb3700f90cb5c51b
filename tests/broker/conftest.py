"""The conformance suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from django.conf import settings


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Transactional: commit hooks fire as in production, and threads see
    # each other's commits. Every configured database is available.
    databases = [alias for alias in ("default", "postgres") if alias in settings.DATABASES]
    marker = pytest.mark.django_db(transaction=True, databases=databases)
    for item in items:
        if "tests/broker/" in str(item.fspath):
            item.add_marker(marker)
