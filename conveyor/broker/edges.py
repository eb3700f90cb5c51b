"""The rule of a dependency edge, in one place (SEMANTICS D11)."""

from __future__ import annotations

from conveyor.models import TaskDependency
from conveyor.states import FAILED, State


def edge_resolution(upstream_state: str, policy: str) -> str:
    """The rule of a dependency edge (D11): what an upstream task in
    *upstream_state* makes of an edge with *policy* (its ``on_failure``).

    Completed satisfies it; a failed upstream (archived or canceled)
    satisfies it under ``continue``, cancels the dependent under
    ``cascade_cancel`` ("cancel") and fails it under ``block``; an upstream
    not yet finished leaves it unresolved. Used at enqueue and when an
    upstream finishes.
    """
    if upstream_state == State.COMPLETED:
        return TaskDependency.SATISFIED
    if upstream_state in FAILED:
        if policy == "continue":
            return TaskDependency.SATISFIED
        if policy == "cascade_cancel":
            return "cancel"
        return TaskDependency.FAILED
    return TaskDependency.UNRESOLVED
