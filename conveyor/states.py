"""Task states and the transitions between them, as data."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    SCHEDULED = "scheduled"
    PENDING = "pending"
    ACTIVE = "active"
    RETRY = "retry"
    COMPLETED = "completed"
    ARCHIVED = "archived"
    CANCELED = "canceled"
    AGGREGATING = "aggregating"
    BLOCKED = "blocked"


ALL_STATES = tuple(State)

# Leased one by one when due.
LEASABLE = (State.PENDING, State.RETRY)
# Waiting for dispatch: may be canceled, expire, or be archived by an admin.
WAITING = (State.SCHEDULED, State.PENDING, State.RETRY, State.AGGREGATING, State.BLOCKED)
# A unique key is claimed while its holder is in one of these.
INCOMPLETE = (*WAITING, State.ACTIVE)
TERMINAL = (State.COMPLETED, State.ARCHIVED, State.CANCELED)
# Dependency outcomes that count as failure for on_failure policies.
FAILED = (State.ARCHIVED, State.CANCELED)

# Admin operation -> states it may start from.
ADMIN_FROM = {
    "cancel": (*WAITING, State.ACTIVE),
    "delete": tuple(s for s in ALL_STATES if s != State.ACTIVE),
    "run": (State.SCHEDULED, State.PENDING, State.RETRY, State.ARCHIVED),
    "reschedule": (State.SCHEDULED, State.PENDING, State.RETRY),
    "archive": (*WAITING, State.CANCELED),
}

# Every transition the engine makes: (from, to) -> what causes it.
TRANSITIONS: dict[tuple[State, State], str] = {
    (State.SCHEDULED, State.PENDING): "promote when due",
    (State.BLOCKED, State.PENDING): "dependencies satisfied",
    (State.BLOCKED, State.SCHEDULED): "dependencies satisfied, time in the future",
    (State.BLOCKED, State.AGGREGATING): "dependencies satisfied, grouped",
    (State.PENDING, State.ACTIVE): "lease",
    (State.RETRY, State.ACTIVE): "lease",
    (State.AGGREGATING, State.ACTIVE): "lease group",
    (State.ACTIVE, State.COMPLETED): "ack",
    (State.ACTIVE, State.RETRY): "fail, or lease expired",
    (State.ACTIVE, State.PENDING): "release",
    (State.ACTIVE, State.ARCHIVED): "skip retry, retries exhausted, canceled while running",
}
