"""Sweeper tests run on SQLite and PostgreSQL, like the broker conformance suite."""

from __future__ import annotations

import pytest
from django.conf import settings


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Transactional, so commit hooks (wakes, resolution) fire as in production
    # and lock threads see each other's commits.
    databases = [alias for alias in ("default", "postgres") if alias in settings.DATABASES]
    marker = pytest.mark.django_db(transaction=True, databases=databases)
    for item in items:
        if "tests/sweepers/" in str(item.fspath):
            item.add_marker(marker)
