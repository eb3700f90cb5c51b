"""Operator actions on single tasks, their batch forms, and reads."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from conveyor.broker.base import Context
from conveyor.broker.dependencies import OPEN_EDGE
from conveyor.broker.filters import TaskFilter, parse_filter
from conveyor.broker.types import IdResult, Page
from conveyor.broker.validation import check_seconds, check_task_id, check_time
from conveyor.conf import conveyor_settings
from conveyor.exceptions import (
    ConveyorError,
    DependentsWaiting,
    DuplicateTask,
    InvalidArgument,
    InvalidState,
    TaskNotFound,
)
from conveyor.models import Task, TaskAttempt
from conveyor.states import ADMIN_FROM, INCOMPLETE, TERMINAL, WAITING, State

CANCELED_BY_ADMIN = "canceled by operator"


class Admin:
    """Operator actions on single tasks (and their batch forms), and reads."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def get_task(self, task_id: str) -> Task:
        task = self.ctx.tasks.filter(id=task_id).first()
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def task_attempts(self, task_id: str) -> list[TaskAttempt]:
        """A task's recorded attempts, oldest first (their error texts opened)."""
        return list(TaskAttempt.objects.using(self.ctx.db).filter(task_id=task_id).order_by("number"))

    def _locked(self, task_id: str, action: str) -> Task:
        task = self.ctx.tasks.select_for_update().filter(id=task_id).first()
        if task is None:
            raise TaskNotFound(task_id)
        if task.state not in ADMIN_FROM[action]:
            raise InvalidState(task_id, task.state, action)
        return task

    def cancel_task(self, task_id: str) -> Task:
        """Cancel a waiting task; ask the worker to abort a running one."""
        now = self.ctx.now()
        with self.ctx.atomic():
            task = self._locked(task_id, "cancel")
            self.cancel_row(task, now)
        return task

    def cancel_row(self, task: Task, now: datetime) -> None:
        if task.state == State.ACTIVE:
            # The attempt ends archived when the worker reports back (or
            # its lease expires), unless it already succeeded.
            task.cancel_requested = True
            task.save(update_fields=["cancel_requested"])
            refs = [(task.id, task.lease_id or "")]
            self.ctx.after_commit(lambda: self.ctx.hooks.cancel_running(refs))
            return
        self._terminate(task, State.CANCELED, CANCELED_BY_ADMIN, now, "canceled")

    def archive_task(self, task_id: str) -> Task:
        """Move a waiting (or canceled) task to the dead-letter state."""
        now = self.ctx.now()
        with self.ctx.atomic():
            task = self._locked(task_id, "archive")
            self.archive_row(task, now)
        return task

    def archive_row(self, task: Task, now: datetime) -> None:
        self._terminate(task, State.ARCHIVED, task.last_error or "archived by operator", now, "archived")

    def _terminate(self, task: Task, state: State, error: str, now: datetime, kind: str) -> None:
        was_waiting = task.state in WAITING
        task.state, task.finished_at, task.updated_at, task.last_error = state, now, now, error
        task.lease_expires_at = None  # (a waiting task holds no lease)
        self.ctx.store.finish(task, ["last_error"])  # the store seals the error text
        if was_waiting and task.has_dependents:
            self.ctx.resolve_after_commit([task.id])
        self.ctx.emit(kind, [task], now)

    def delete_task(self, task_id: str) -> None:
        """Delete a task in any state but active, and not while unfinished tasks wait on it."""
        now = self.ctx.now()
        with self.ctx.atomic():
            self.delete_row(self._locked(task_id, "delete"), now)

    def delete_row(self, task: Task, now: datetime) -> None:
        task_id = task.id
        if task.has_dependents:
            waiting = self.ctx.edges.filter(OPEN_EDGE, depends_on_id=task_id).exclude(task__state__in=TERMINAL)
            dependents = list(waiting.values_list("task_id", flat=True)[:4])
            if dependents:
                raise DependentsWaiting(task_id, task.state, dependents)
        finished = task.state in (State.COMPLETED, State.ARCHIVED, State.CANCELED)
        # Announce before deleting: Model.delete() clears the instance's pk.
        self.ctx.emit("deleted", [task], now)
        task.delete()
        # Waiting dependents treat a deleted dependency as canceled.
        if task.has_dependents and not finished:
            self.ctx.resolve_after_commit([task_id])

    def run_task(self, task_id: str) -> Task:
        """Make a scheduled, waiting, retrying or archived task due now."""
        now = self.ctx.now()
        with self.ctx.atomic():
            task = self._locked(task_id, "run")
            self.run_row(task, now)
        return task

    def run_row(self, task: Task, now: datetime) -> None:
        if task.state == State.ARCHIVED and task.unique_key:
            self._check_key_free(task)
        task.state, task.due_at, task.updated_at, task.finished_at = State.PENDING, now, now, None
        # A revived dead letter starts a clean attempt: a cancel that
        # ended its last run must not end the next one too.
        task.cancel_requested = False
        task.save(update_fields=["state", "due_at", "updated_at", "finished_at", "cancel_requested"])
        self.ctx.wake_after_commit([task.queue])
        self.ctx.emit("enqueued", [task], now)

    def _check_key_free(self, task: Task) -> None:
        # Reviving a dead letter re-claims its unique key, which a newer
        # task may hold by now.
        holder = (
            self.ctx.tasks.filter(unique_key=task.unique_key, state__in=INCOMPLETE)
            .exclude(unique_until__lte=self.ctx.now())
            .values_list("id", flat=True)
            .first()
        )
        if holder:
            raise DuplicateTask(task.unique_key or "", holder)
        self.ctx.tasks.filter(unique_key=task.unique_key, unique_until__lte=self.ctx.now()).update(unique_key=None)

    def reschedule_task(
        self, task_id: str, *, process_at: datetime | None = None, process_in: float | None = None
    ) -> Task:
        """Move a waiting task to a new due time (future -> scheduled, else pending)."""
        now = self.ctx.now()
        when = _reschedule_time(now, process_at, process_in)
        with self.ctx.atomic():
            task = self._locked(task_id, "reschedule")
            task.state = State.SCHEDULED if when > now else State.PENDING
            task.due_at, task.updated_at = when, now
            task.save(update_fields=["state", "due_at", "updated_at"])
            if task.state == State.PENDING:
                self.ctx.wake_after_commit([task.queue])
            self.ctx.emit("scheduled" if task.state == State.SCHEDULED else "enqueued", [task], now)
        return task

    # -- batch forms -------------------------------------------------------------

    def cancel_tasks(self, ids: Sequence[str]) -> list[IdResult]:
        return self._per_id(ids, self.cancel_task)

    def archive_tasks(self, ids: Sequence[str]) -> list[IdResult]:
        return self._per_id(ids, self.archive_task)

    def run_tasks(self, ids: Sequence[str]) -> list[IdResult]:
        return self._per_id(ids, self.run_task)

    def delete_tasks(self, ids: Sequence[str]) -> list[IdResult]:
        return self._per_id(ids, self.delete_task)

    def reschedule_tasks(
        self, ids: Sequence[str], *, process_at: datetime | None = None, process_in: float | None = None
    ) -> list[IdResult]:
        _reschedule_time(self.ctx.now(), process_at, process_in)  # reject bad times before touching anything
        return self._per_id(ids, lambda tid: self.reschedule_task(tid, process_at=process_at, process_in=process_in))

    def _per_id(self, ids: Sequence[str], action: Callable[[str], Task | None]) -> list[IdResult]:
        if not isinstance(ids, (list, tuple)) or not ids:
            raise InvalidArgument("ids", "must list at least one task id")
        if len(ids) > conveyor_settings.BATCH_MAX_ITEMS:
            raise InvalidArgument("ids", f"must list at most {conveyor_settings.BATCH_MAX_ITEMS} ids")
        for i, tid in enumerate(ids):
            check_task_id(tid, f"ids[{i}]")
        results = []
        for tid in ids:
            try:
                results.append(IdResult(tid, task=action(tid)))
            except ConveyorError as exc:
                results.append(IdResult(tid, error=exc))
        return results

    # -- listing -----------------------------------------------------------------

    def list_tasks(
        self,
        *,
        queue: str | None = None,
        state: str | None = None,
        type: str | None = None,
        search: str | None = None,
        where: str | None = None,
        contains: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> Page:
        """Newest first by id; ``next_page_token`` only when the page is full.
        *where* and *contains* search inside tasks (conveyor/broker/filters.py)."""
        size = conveyor_settings.LIST_PAGE_DEFAULT if limit in (None, 0) else limit
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= conveyor_settings.LIST_PAGE_MAX:
            raise InvalidArgument("limit", f"must be between 1 and {conveyor_settings.LIST_PAGE_MAX}")
        given = {"queue": queue, "state": state, "type": type, "search": search, "where": where, "contains": contains}
        qs = self.filtered(parse_filter(given))
        if page_token:
            qs = qs.filter(id__lt=decode_page_token(page_token))
        tasks = list(qs.order_by("-id")[:size])
        token = encode_page_token(tasks[-1].id) if len(tasks) == size else None
        return Page(tasks, token)

    def filtered(self, selected: TaskFilter) -> Any:
        """The tasks *selected* matches, as a queryset (unordered)."""
        qs = self.ctx.tasks.all()
        if selected.queue:
            qs = qs.filter(queue=selected.queue)
        if selected.state:
            qs = qs.filter(state=selected.state)
        if selected.type:
            qs = qs.filter(type=selected.type)
        if selected.search:
            qs = _search(qs, selected.search)
        if selected.where or selected.contains:
            payload = [(c.path, c.value) for c in selected.where if c.source == "payload"]
            metadata = {c.path[0]: c.value for c in selected.where if c.source == "metadata"}
            qs = self.ctx.store.matching(qs, payload, metadata, selected.contains)
        return qs


def _search(qs, text: str):  # type: ignore[no-untyped-def]
    from django.db.models import Q

    text = text.strip()
    # An id prefix as a range on the primary key (an index scan; no LIKE index).
    prefix = Q(id__gte=text, id__lt=text + "\U0010ffff") & Q(id__startswith=text)
    return qs.filter(Q(id=text) | Q(unique_key=text) | Q(concurrency_key=text) | prefix)


def encode_page_token(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_page_token(token: str) -> str:
    try:
        padded = token + "=" * (-len(token) % 4)
        value = base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument("page_token", "is not a token this server issued") from None
    # Tokens encode a task id; anything else (empty, control characters such
    # as NUL, which PostgreSQL text cannot hold) was not issued here.
    try:
        return check_task_id(value, "page_token")
    except InvalidArgument:
        raise InvalidArgument("page_token", "is not a token this server issued") from None


def _reschedule_time(now: datetime, process_at: datetime | None, process_in: float | None) -> datetime:
    if (process_at is None) == (process_in is None):
        raise InvalidArgument("process_at", "give exactly one of process_at and process_in")
    if process_at is not None:
        return check_time(process_at, "process_at")
    return now + timedelta(seconds=check_seconds(process_in, "process_in", allow_zero=True))
