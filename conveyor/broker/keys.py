"""Keys of encryption at rest: which rows each key holds, and re-sealing under the active one.

``reseal_step`` seals one small batch of rows anew under the active key and
commits it: run while the cluster works (it passes over active rows and
rows another transaction holds, and locks only the rows of its batch for
the moment it takes), and stopped and started again at will, since what is
left to do is read from the table itself (rows whose ``key_id`` is not the
active key). ``manage.py conveyor keys rotate`` drives it
(conveyor/cli/keys.py, docs/encryption.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conveyor.broker.base import Context
from conveyor.exceptions import InvalidArgument
from conveyor.sealing import active_key_id, keyring
from conveyor.store.base import Resealed

RESEAL_BATCH_MAX = 1000


@dataclass(frozen=True)
class KeyUse:
    """One key id's rows, and whether this node's keyring holds it."""

    key_id: str | None  # None: plaintext rows
    tasks: int = 0
    cron: int = 0
    attempts: int = 0  # attempt history rows (their errors), re-sealed with their tasks
    held: bool = False
    active: bool = False


@dataclass(frozen=True)
class KeyStatus:
    active: str | None
    keys: list[KeyUse] = field(default_factory=list)

    @property
    def to_reseal(self) -> int:
        """Task rows not under the active key (plaintext ones included)."""
        return sum(k.tasks for k in self.keys if not k.active)

    @property
    def missing(self) -> list[KeyUse]:
        """Keys rows are sealed under that this keyring does not hold."""
        return [k for k in self.keys if k.key_id is not None and not k.held]


class Keys:
    """Keys of encryption at rest: what each holds, and re-sealing."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def key_status(self) -> KeyStatus:
        """Rows per key id, of tasks and cron entries, against this node's keyring."""
        counts = self.ctx.store.key_counts()
        ring = keyring()
        active = active_key_id()
        ids = (
            set(counts["tasks"])
            | set(counts["cron"])
            | set(counts.get("attempts", {}))
            | set(ring.key_ids if ring else [])
        )
        uses = [
            KeyUse(
                key_id,
                tasks=counts["tasks"].get(key_id, 0),
                cron=counts["cron"].get(key_id, 0),
                attempts=counts.get("attempts", {}).get(key_id, 0),
                held=key_id is not None and ring is not None and ring.holds(key_id),
                active=key_id is not None and key_id == active,
            )
            for key_id in ids
        ]
        order = {key_id: i for i, key_id in enumerate(ring.key_ids if ring else [])}
        uses.sort(key=lambda k: (k.key_id is None, order.get(k.key_id, len(order)), k.key_id or ""))
        return KeyStatus(active, uses)

    def reseal_step(self, after: str = "", limit: int = 100) -> Resealed:
        """Seal up to *limit* task rows after id *after* anew under the active key (one transaction)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RESEAL_BATCH_MAX:
            raise InvalidArgument("batch", f"must be an integer from 1 to {RESEAL_BATCH_MAX}")
        return self.ctx.store.reseal_tasks(self._active_key(), after, limit)

    def reseal_cron(self) -> Resealed:
        """Seal every cron entry anew under the active key."""
        return self.ctx.store.reseal_cron(self._active_key())

    @staticmethod
    def _active_key() -> str:
        key_id = active_key_id()
        if key_id is None:
            raise InvalidArgument(
                "CONVEYOR_ENCRYPTION_KEYS", "is not set: there is no key to seal under (docs/encryption.md)"
            )
        return key_id
