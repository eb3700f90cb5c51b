"""The rule of a dependency edge and of a dependent, in one place (SEMANTICS D11).

Both the enqueue (a task whose dependencies are already known) and the
resolver (an upstream task just finished) decide through these two
functions: each edge's resolution, then what the edges make of the task.
"""

from __future__ import annotations

from conveyor.models import TaskDependency
from conveyor.states import FAILED, State

CANCEL = "cancel"  # an edge's verdict under cascade_cancel; stored as FAILED
BLOCKED, READY = "blocked", "ready"


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
            return CANCEL
        return TaskDependency.FAILED
    return TaskDependency.UNRESOLVED


def stored_resolution(resolution: str) -> str:
    """The resolution an edge row keeps: a cascade's CANCEL is stored as FAILED."""
    return TaskDependency.FAILED if resolution == CANCEL else resolution


def dependent_verdict(resolutions: list[str]) -> str:
    """What a dependent's edges make of it (D11): CANCEL when any edge
    cancels it, READY when every edge is satisfied (or it has none), else BLOCKED."""
    if not resolutions:  # (most tasks: no call to all())
        return READY
    if CANCEL in resolutions:
        return CANCEL
    if all(r == TaskDependency.SATISFIED for r in resolutions):
        return READY
    return BLOCKED
