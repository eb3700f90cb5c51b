"""Sweeper tests run on SQLite and PostgreSQL, like the broker conformance suite."""

# Database access and cleanup come from the `db_alias` fixture (tests/conftest.py):
# every test here takes `broker` or `db_alias` and runs once per database.
