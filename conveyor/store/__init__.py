"""The database contract of task state: one interface, a store per database.

``store_for(alias)`` gives the database's store: ``PostgresStore`` (SQL in
named statements, psycopg's public API, sync and async) or ``SqliteStore``
(the ORM), inside a ``SealingStore`` (encryption at rest). The broker above
it holds the rules and no SQL; see docs/architecture.md, "The store".
"""

from __future__ import annotations

from django.db import connections

from conveyor.store.base import (
    KEY_UNKNOWN,
    NOBODY,
    OUTCOME_COLUMNS,
    Attempt,
    OutcomeRow,
    Runner,
    Store,
    Wanted,
    cell,
    task_columns,
)

__all__ = [
    "KEY_UNKNOWN",
    "NOBODY",
    "OUTCOME_COLUMNS",
    "Attempt",
    "OutcomeRow",
    "Runner",
    "Store",
    "Wanted",
    "cell",
    "store_for",
    "task_columns",
]

_stores: dict[str, Store] = {}


def store_for(alias: str) -> Store:
    """The store of database *alias* (one per alias and process), with
    encryption at rest around it (``SealingStore``)."""
    store = _stores.get(alias)
    if store is None:
        from conveyor.store.sealing import SealingStore

        inner: Store
        if connections[alias].vendor == "postgresql":
            from conveyor.store.postgres import PostgresStore

            inner = PostgresStore(alias)
        else:
            from conveyor.store.sqlite import SqliteStore

            inner = SqliteStore(alias)
        store = _stores[alias] = SealingStore(inner)  # type: ignore[assignment]
    return store
