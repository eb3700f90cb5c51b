"""Dependency resolution: what finishing a task means for the tasks waiting on it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from conveyor.broker.base import Context
from conveyor.broker.edges import CANCEL, READY, dependent_verdict, edge_resolution, stored_resolution
from conveyor.broker.enqueue import CANCELED_BY_DEPENDENCY, ready_state
from conveyor.broker.types import SweepReport
from conveyor.models import Task, TaskDependency
from conveyor.states import TERMINAL, State

PASS_LIMIT = 1000


class Dependencies:
    """Dependency resolution: what a finished task means for the tasks waiting on it."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def resolve_dependents(self, task_ids: Sequence[str]) -> SweepReport:
        """Resolve the edges of tasks that reached a terminal state (or were deleted).

        ``completed`` satisfies an edge; ``archived``/``canceled`` (or a
        deleted row) applies the edge's policy: ``continue`` satisfies it,
        ``block`` leaves the dependent blocked, ``cascade_cancel`` cancels
        the dependent and resolves its own dependents in turn. A blocking
        edge stays open: if the failed dependency is revived and completes,
        the edge is satisfied then.
        """
        report = SweepReport()
        todo = list(dict.fromkeys(task_ids))
        while todo:
            upstream, todo = todo[:PASS_LIMIT], todo[PASS_LIMIT:]
            canceled = self._resolve_pass(upstream, report)
            todo.extend(canceled)
        return report

    def _resolve_pass(self, upstream: list[str], report: SweepReport) -> list[str]:
        now = self.ctx.now()
        canceled: list[str] = []
        with self.ctx.atomic():
            states = dict(self.ctx.tasks.filter(id__in=upstream).values_list("id", "state"))
            finished = [tid for tid in upstream if states.get(tid, State.CANCELED) in TERMINAL]
            dependents = sorted(
                set(self.ctx.edges.filter(OPEN_EDGE, depends_on_id__in=finished).values_list("task_id", flat=True))
            )
            for dep_id in dependents:
                if self._resolve_one(dep_id, states, now, report):
                    canceled.append(dep_id)
        return canceled

    def _resolve_one(self, task_id: str, upstream_states: dict[str, str], now: datetime, report: SweepReport) -> bool:
        """Resolve one dependent's edges; return True if it was cascade-canceled.

        The dependent's row is locked first, so resolvers of its siblings
        serialize on it: the last one to finish sees every other edge
        resolved and promotes the join exactly once.
        """
        task = self.ctx.tasks.select_for_update().filter(id=task_id).first()
        if task is None:
            return False
        resolutions = []
        for edge in self.ctx.edges.filter(task_id=task_id):
            resolution = edge.resolution
            if _is_open(edge):
                state = upstream_states.get(edge.depends_on_id)
                if state is None:
                    state = self._state_of(edge.depends_on_id)
                if state in TERMINAL:
                    resolution = edge_resolution(state, edge.on_failure)
                    if stored_resolution(resolution) != edge.resolution:
                        edge.resolution = stored_resolution(resolution)
                        TaskDependency.objects.using(self.ctx.db).filter(pk=edge.pk).update(resolution=edge.resolution)
            resolutions.append(resolution)
        if task.state != State.BLOCKED:
            return False
        verdict = dependent_verdict(resolutions)
        if verdict == CANCEL:
            return self._cancel_blocked(task, now)
        if verdict == READY:
            self._promote(task, now, report)
        return False

    def _state_of(self, task_id: str) -> str:
        # A deleted dependency counts as canceled.
        return self.ctx.tasks.filter(id=task_id).values_list("state", flat=True).first() or State.CANCELED

    def _cancel_blocked(self, task: Task, now: datetime) -> bool:
        won = self.ctx.tasks.filter(id=task.id, state=State.BLOCKED).update(
            state=State.CANCELED, finished_at=now, updated_at=now, last_error=CANCELED_BY_DEPENDENCY
        )
        if won:
            task.state, task.last_error = State.CANCELED, CANCELED_BY_DEPENDENCY
            self.ctx.emit("canceled", [task], now)
        return bool(won)

    def _promote(self, task: Task, now: datetime, report: SweepReport) -> None:
        state = ready_state(task, now)
        # Guarded: only the resolver that moves it out of blocked wins.
        if self.ctx.tasks.filter(id=task.id, state=State.BLOCKED).update(state=state, updated_at=now):
            task.state = state
            report.count += 1
            if state == State.PENDING:
                report.queues.add(task.queue)
                self.ctx.wake_after_commit([task.queue])
            self.ctx.emit("promoted", [task], now)

    def promote_ready_dependents(self) -> SweepReport:
        """Safety net: resolve blocked tasks whose dependencies finished unnoticed."""
        # Filter in the query, not after the cap: dependencies that are still
        # running must not crowd the finished ones out of a pass.
        # (NOT EXISTS is an anti-join; NOT IN over all live tasks is not.)
        upstream = self.ctx.tasks.filter(id=OuterRef("depends_on_id"))
        unresolved = self.ctx.edges.filter(
            ~Exists(upstream.exclude(state__in=TERMINAL)),
            resolution=TaskDependency.UNRESOLVED,
            task__state=State.BLOCKED,
        )
        # A blocking edge of a failed dependency reopens once the dependency
        # was revived and completed.
        reopened = self.ctx.edges.filter(
            Exists(upstream.filter(state=State.COMPLETED)),
            resolution=TaskDependency.FAILED,
            on_failure="block",
            task__state=State.BLOCKED,
        )
        cap = PASS_LIMIT * 10
        stale = set(unresolved.values_list("depends_on_id", flat=True).distinct()[:cap])
        stale |= set(reopened.values_list("depends_on_id", flat=True).distinct()[:cap])
        report = self.resolve_dependents(sorted(stale))
        # Blocked tasks whose edges are all satisfied (a resolver died midway).
        orphans = self.ctx.tasks.filter(state=State.BLOCKED).exclude(
            dependency_edges__resolution__in=[TaskDependency.UNRESOLVED, TaskDependency.FAILED]
        )[:PASS_LIMIT]
        now = self.ctx.now()
        for task in orphans:
            with self.ctx.atomic():
                self._promote(task, now, report)
        return report


# Edges a finishing dependency may still decide: unresolved ones, and
# blocking edges of a failed dependency, which an operator may revive (run
# again); if it then completes, the edge is satisfied after all.
OPEN_EDGE = Q(resolution=TaskDependency.UNRESOLVED) | Q(resolution=TaskDependency.FAILED, on_failure="block")


def _is_open(edge: TaskDependency) -> bool:
    return edge.resolution == TaskDependency.UNRESOLVED or (
        edge.resolution == TaskDependency.FAILED and edge.on_failure == "block"
    )
