"""The sealing store stands around every store and covers the whole interface by hand."""

from __future__ import annotations

from conveyor.store.base import Store
from conveyor.store.postgres import PostgresStore
from conveyor.store.sealing import SealingStore


def methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def test_the_sealing_store_implements_every_method_of_the_interface_itself() -> None:
    # The protocol's methods and the PostgreSQL store's async twins: a method
    # missing here is not reachable from the broker (no __getattr__ passes it on).
    interface = methods(Store) | {n for n in methods(PostgresStore) if n.startswith("a")} - {"arun"}
    assert interface <= methods(SealingStore), interface - methods(SealingStore)
    assert "__getattr__" not in vars(SealingStore)
