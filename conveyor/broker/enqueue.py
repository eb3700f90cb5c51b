"""Enqueue: one task, a batch (each item alone) or a transaction (all or none)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from django.db import IntegrityError, connections

from conveyor.broker import offers
from conveyor.broker.base import Context, Then, run_now
from conveyor.broker.edges import BLOCKED, CANCEL, dependent_verdict, edge_resolution, stored_resolution
from conveyor.broker.rows import NewTask, new_task, new_tasks, task_values
from conveyor.broker.types import ItemResult, TaskSpec
from conveyor.broker.validation import check_dependencies, task_fields
from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError, DuplicateTask, InvalidArgument
from conveyor.ids import new_ulid
from conveyor.models import Task, TaskDependency
from conveyor.states import INCOMPLETE, State
from conveyor.store import task_columns

CANCELED_BY_DEPENDENCY = "canceled by failed dependency"


@dataclass
class _Item:
    index: int
    fields: dict[str, Any]
    deps: list[tuple[str, str]]
    id: str
    given_id: bool
    task: NewTask | None = None
    edges: list[TaskDependency] = field(default_factory=list)


class Enqueuer:
    """Enqueue: validation, ids, unique claims, dependencies, the initial state, offers."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # Queues where an enqueue just found no offer to take (broker/offers.py, MISS_PAUSE).
        self.offer_misses = offers.Misses()

    def enqueue(self, spec: TaskSpec) -> Task:
        """Store one task and return it as stored; raise on bad input or duplicate."""
        one = self._one_insert_fields(spec) if self._may_take_offers() else None
        if one is not None:
            now, fields = one
            if fields["due_at"] <= now:  # (a scheduled task takes no offer)
                return self._insert_taking_offer(new_ulid(now), fields, now)
        result = self._store([spec], mode="one")[0]
        if result.error is not None:
            raise result.error
        return self.as_model(result.task)

    def enqueue_one(self, spec: TaskSpec) -> ItemResult:
        """Like ``enqueue``, but also tells whether the task was created (False: the id existed)."""
        return self._store([spec], mode="one")[0]

    def enqueue_batch(self, specs: Sequence[TaskSpec]) -> list[ItemResult]:
        """Store each valid item; report per item. Invalid items change nothing."""
        self._check_batch_size(specs)
        return self._store(list(specs), mode="batch")

    def enqueue_tx(self, specs: Sequence[TaskSpec]) -> list[Task]:
        """Store every item or none; an error names the failing item's index."""
        self._check_batch_size(specs)
        results = self._store(list(specs), mode="tx")
        return [self.as_model(r.task) for r in results if r.task is not None]

    def as_model(self, task: Task | NewTask | None) -> Task:
        """The ``Task`` instance of an enqueue's result (a new row's record, or a row read back)."""
        assert task is not None
        return task.model(self.ctx.db) if isinstance(task, NewTask) else task

    # -- one INSERT from an event loop (a node's fast path) ------------------

    def one_insert_task(self, spec: TaskSpec) -> NewTask | None:
        """The row a task that is one INSERT would be, or None when it needs
        ``enqueue_one``: an id of the caller's (which may exist already), a
        unique key, dependencies or a group. Bad input raises as
        ``enqueue_one`` does. Writes nothing."""
        one = self._one_insert_fields(spec)
        if one is None:
            return None
        now, fields = one
        task = new_task(new_ulid(now), fields)
        task.enqueued_at = task.updated_at = now
        task.state = ready_state(task, now)
        return task

    def _one_insert_fields(self, spec: TaskSpec) -> tuple[datetime, dict[str, Any]] | None:
        """The time and validated fields of a task that is one INSERT; None for
        one with an id of the caller's, dependencies, a unique key or a group."""
        if spec.id is not None or spec.depends_on:
            return None
        now = self.ctx.now()
        fields = task_fields(spec, now)
        return None if fields["unique_key"] or fields["group"] else (now, fields)

    async def insert_on(self, conn: Any, task: NewTask) -> bool:
        """INSERT *task* through a psycopg ``AsyncConnection`` (autocommit, PostgreSQL).

        Durable as every enqueue (the session keeps the server's
        ``synchronous_commit``). Safe to repeat after a connection error:
        the id is the task's own, so a first attempt that did commit makes
        the second a duplicate key, and this returns False (already stored).
        The task is announced after its durable commit. A due task takes an
        offer if there is one, as from Django code (then it is stored
        leased, its node is notified, and it needs no wake).
        """
        values = [getattr(task, attname) for _, attname in task_columns()]
        take = None
        if task.state == State.PENDING:
            take = offers.Take.of(values, task.enqueued_at, misses=self.offer_misses)
        params = take.params(values) if take is not None else offers.insert_params(values)
        try:
            row = await self.ctx.store.ainsert_one(conn, params, take_offer=take is not None)
        except psycopg.errors.UniqueViolation:
            # Stored by the first attempt: say what it stored (it may have taken an offer).
            stored = await self.ctx.store.alease_of(conn, task.id)
            if stored is not None:
                offers.set_lease(task, stored)
            return False
        taken = take.taken(row) if take is not None and row is not None else None
        if taken is not None:
            offers.set_lease(task, taken)
        return True

    def announce_inserted(self, task: NewTask) -> ItemResult:
        """Wakes and events for a task ``insert_on`` stored (it has committed)."""
        self._announce([task], task.enqueued_at, then=run_now)
        return ItemResult(index=0, task=task, created=True)

    def _check_batch_size(self, specs: Sequence[TaskSpec]) -> None:
        limit = conveyor_settings.BATCH_MAX_ITEMS
        if not specs:
            raise InvalidArgument("tasks", "must contain at least one task")
        if len(specs) > limit:
            raise InvalidArgument("tasks", f"must contain at most {limit} tasks")

    # -- the one path all three forms share ---------------------------------

    def _store(self, specs: list[TaskSpec], mode: str) -> list[ItemResult]:
        now = self.ctx.now()
        results = [ItemResult(index=i) for i in range(len(specs))]
        items = self._validate(specs, results, now, mode)
        try:
            with self._transaction(items):
                self._store_items(items, results, now, mode)
        except IntegrityError:
            # A concurrent enqueue won a race on an id or a unique key between
            # our checks and our insert. Redo item by item: the checks now see
            # the winner, so each item gets its proper answer.
            if mode == "batch" and len(items) > 1:
                return self._store_one_by_one(specs)
            retry = [ItemResult(index=i) for i in range(len(specs))]
            items = self._validate(specs, retry, now, mode)
            with self.ctx.atomic():
                self._store_items(items, retry, now, mode)
            return retry
        return results

    def _transaction(self, items: list[_Item]) -> Any:
        """The transaction an enqueue needs.

        One task with a server-made id, no unique key and no dependencies
        is a single INSERT, atomic by itself: on PostgreSQL it runs in
        autocommit, saving the BEGIN and COMMIT round trips. (Inside a
        caller's transaction it simply joins that transaction.)
        """
        simple = len(items) == 1 and not items[0].given_id and not items[0].deps and not items[0].fields["unique_key"]
        if simple and self.ctx.store.one_insert_in_autocommit:
            return contextlib.nullcontext()
        return self.ctx.atomic()

    def _store_one_by_one(self, specs: list[TaskSpec]) -> list[ItemResult]:
        out = []
        for i, spec in enumerate(specs):
            result = self._store([spec], mode="one")[0]
            result.index = i
            result.error = _with_index(result.error, i)
            out.append(result)
        return out

    def _validate(self, specs: list[TaskSpec], results: list[ItemResult], now: datetime, mode: str) -> list[_Item]:
        items = []
        for i, spec in enumerate(specs):
            try:
                fields = task_fields(spec, now)
                deps = check_dependencies(spec)
            except InvalidArgument as exc:
                error = exc if mode == "one" else InvalidArgument(exc.field, exc.reason, index=i)
                if mode == "tx":
                    raise error from None
                results[i].error = error
                continue
            given = spec.id is not None
            items.append(_Item(i, fields, deps, spec.id if given else new_ulid(now), given))
        return items

    def _store_items(self, items: list[_Item], results: list[ItemResult], now: datetime, mode: str) -> None:
        # The broker is shared between threads: keep per-call state local.
        repeats: list[tuple[int, int]] = []
        try:
            self._store_fresh(self._drop_known_ids(items, results, repeats), results, now, mode)
        finally:
            for winner, repeat in repeats:
                results[repeat].task = results[winner].task
                results[repeat].error = results[winner].error

    def _store_fresh(self, fresh: list[_Item], results: list[ItemResult], now: datetime, mode: str) -> None:
        claims = self._live_claims(fresh, now)
        known = self._lock_dependencies({dep for it in fresh for dep, _ in it.deps})
        if mode == "tx":
            self._place_all(fresh, known, claims, now)
        else:
            fresh = self._place_in_order(fresh, results, known, claims, now, mode)
        if not fresh:
            return
        tasks = [it.task for it in fresh]
        self.ctx.store.insert_tasks(tasks)
        edges = [edge for it in fresh for edge in it.edges]
        if edges:
            self.ctx.edges.bulk_create(edges)
            upstream = {e.depends_on_id for e in edges}
            self.ctx.tasks.filter(id__in=upstream, has_dependents=False).update(has_dependents=True)
        for it in fresh:
            results[it.index].task = it.task
            results[it.index].created = True
        self._announce(tasks, now)

    def _drop_known_ids(
        self, items: list[_Item], results: list[ItemResult], repeats: list[tuple[int, int]]
    ) -> list[_Item]:
        """Repeated ids are idempotent: the stored task, or the request's first occurrence."""
        given = [it.id for it in items if it.given_id]
        stored = {t.id: t for t in self.ctx.tasks.filter(id__in=given)} if given else {}
        first: dict[str, _Item] = {}
        fresh = []
        for it in items:
            if it.id in stored:
                results[it.index].task = stored[it.id]
            elif it.id in first:
                repeats.append((first[it.id].index, it.index))
            else:
                first[it.id] = it
                fresh.append(it)
        for it, task in zip(fresh, new_tasks([(it.id, it.fields) for it in fresh]), strict=True):
            it.task = task
        return fresh

    # -- placing items: unique claims, dependencies, initial state -----------

    def _place_all(self, items: list[_Item], known: dict[str, str], claims: dict[str, str], now: datetime) -> None:
        """Transaction: any item may reference any other; any refusal raises with its index."""
        in_request = {it.id: it for it in items}
        for it in self._dependency_order(items, in_request, known):
            try:
                self._place(it, known, in_request, now)
            except InvalidArgument as exc:
                raise InvalidArgument(exc.field, exc.reason, index=it.index) from None
        # In request order, so a collision between two items names the later one.
        for it in items:
            self._check_claim(it, claims, it.index)
            self._register_claim(it, claims)

    def _place_in_order(
        self,
        items: list[_Item],
        results: list[ItemResult],
        known: dict[str, str],
        claims: dict[str, str],
        now: datetime,
        mode: str,
    ) -> list[_Item]:
        """One task or a batch: each item alone, in request order.

        An item may reference stored tasks and earlier items that were
        accepted. A refused item claims nothing, so its unique key stays free
        for later items.
        """
        placed: dict[str, _Item] = {}
        for it in items:
            index = None if mode == "one" else it.index
            try:
                self._check_claim(it, claims, index)
                self._place(it, known, placed, now)
            except DuplicateTask as exc:
                results[it.index].error = exc
                continue
            except InvalidArgument as exc:
                results[it.index].error = exc if index is None else _with_index(exc, index)
                continue
            self._register_claim(it, claims)
            placed[it.id] = it
        return list(placed.values())

    def _live_claims(self, items: list[_Item], now: datetime) -> dict[str, str]:
        """unique key -> id of the task holding a live claim on it."""
        keys = {it.fields["unique_key"] for it in items if it.fields["unique_key"]}
        if not keys:
            return {}
        # A claim with a TTL lapses at unique_until; release lapsed claims so
        # the partial unique index only sees live ones.
        self.ctx.tasks.filter(unique_key__in=keys, unique_until__lte=now).update(unique_key=None)
        return dict(self.ctx.tasks.filter(unique_key__in=keys, state__in=INCOMPLETE).values_list("unique_key", "id"))

    @staticmethod
    def _check_claim(it: _Item, claims: dict[str, str], index: int | None) -> None:
        key = it.fields["unique_key"]
        if key and key in claims:
            raise DuplicateTask(key, claims[key], index=index)

    @staticmethod
    def _register_claim(it: _Item, claims: dict[str, str]) -> None:
        # A task born canceled holds no claim (the key index ignores it too).
        key = it.fields["unique_key"]
        if key and it.task is not None and it.task.state in INCOMPLETE:
            claims[key] = it.id

    def _lock_dependencies(self, ids: set[str]) -> dict[str, str]:
        """The states of the stored dependencies, read under a row lock.

        Without the lock, a dependency could finish between our read (still
        running: the edge stays unresolved) and our commit (which sets its
        ``has_dependents``): its completion would not see the flag, nobody
        would resolve the edge and the dependent would stay blocked. Locked,
        the completion either commits first (we read it finished) or waits
        for us and then sees the flag. Ordered by id so that concurrent
        enqueues sharing dependencies cannot deadlock.
        """
        if not ids:
            return {}
        rows = self.ctx.tasks.select_for_update().filter(id__in=ids).order_by("id").values_list("id", "state")
        return dict(rows)

    def _dependency_order(self, items: list[_Item], in_request: dict[str, _Item], known: dict[str, str]) -> list[_Item]:
        """Items in an order where in-request dependencies come first; reject a cycle.

        Iterative depth-first search: a chain of 1000 forward references
        must not exhaust the interpreter's stack.
        """

        def request_deps(it: _Item) -> Iterator[tuple[int, _Item]]:
            for pos, (dep, _) in enumerate(it.deps):
                if dep in in_request and dep not in known:
                    yield pos, in_request[dep]

        order: list[_Item] = []
        mark: dict[str, int] = {}  # 1 = on the current path, 2 = done
        for root in items:
            if root.id in mark:
                continue
            mark[root.id] = 1
            stack = [(root, request_deps(root))]
            while stack:
                it, deps = stack[-1]
                step = next(deps, None)
                if step is None:
                    stack.pop()
                    mark[it.id] = 2
                    order.append(it)
                    continue
                pos, dep = step
                seen = mark.get(dep.id)
                if seen == 2:
                    continue
                if seen == 1:
                    path = [s.id for s, _ in stack]
                    cycle = " -> ".join([*path[path.index(dep.id) :], dep.id])
                    raise InvalidArgument(f"depends_on[{pos}].task_id", f"dependency cycle: {cycle}", index=it.index)
                mark[dep.id] = 1
                stack.append((dep, request_deps(dep)))
        return order

    def _place(self, it: _Item, known: dict[str, str], siblings: dict[str, _Item], now: datetime) -> None:
        """Decide the item's initial state from its dependencies; build its edges."""
        assert it.task is not None
        resolutions = []
        for i, (dep, policy) in enumerate(it.deps):
            if dep in known:
                dep_state = known[dep]
            elif dep in siblings and siblings[dep].task is not None:
                dep_state = siblings[dep].task.state  # type: ignore[union-attr]
                siblings[dep].task.has_dependents = True  # type: ignore[union-attr]
            else:
                raise InvalidArgument(f"depends_on[{i}].task_id", f"unknown task {dep}")
            resolution = edge_resolution(dep_state, policy)
            resolutions.append(resolution)
            edge = TaskDependency(
                task_id=it.id, depends_on_id=dep, on_failure=policy, resolution=stored_resolution(resolution)
            )
            it.edges.append(edge)
        task = it.task
        task.enqueued_at = task.updated_at = now
        verdict = dependent_verdict(resolutions)
        if verdict == CANCEL:
            task.state, task.finished_at, task.last_error = State.CANCELED, now, CANCELED_BY_DEPENDENCY
        elif verdict == BLOCKED:
            task.state = State.BLOCKED
        else:
            task.state = ready_state(task, now)

    def _insert_taking_offer(self, task_id: str, fields: dict[str, Any], now: datetime) -> Task:
        """Store one due task of one INSERT in autocommit, taking a node's offer
        if there is one (docs/architecture.md, "Offers"), and announce it.

        The statement commits durably by itself; a task that took an offer
        is stored leased and reaches its node as the INSERT commits, so it
        needs no wake.
        """
        values = task_values(task_id, {**fields, "state": State.PENDING, "enqueued_at": now, "updated_at": now})
        task = offers.insert_taking_offer(self.ctx.store, self.ctx.db, values, now, self.offer_misses)
        self._announce([task], now, then=run_now)
        return task

    def _may_take_offers(self) -> bool:
        """Whether a due task of one INSERT may look for a node's offer: on
        PostgreSQL, outside any transaction (the offer's lease starts at the
        INSERT, and its node hears of it at commit), when these hooks reach
        other processes (with nobody to wake there is no node to offer)."""
        if not (self.ctx.hooks.reaches_other_processes and self.ctx.store.has_offers):
            return False
        conn = connections[self.ctx.db]
        if not conn.get_autocommit() or conn.in_atomic_block:
            return False
        # Django's flags say autocommit; so must the server (a raw "BEGIN"
        # leaves them unchanged).
        conn.ensure_connection()
        return conn.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    def _announce(self, tasks: Sequence[Task | NewTask], now: datetime, then: Then | None = None) -> None:
        """The wake, then the events (together: on a node the wake only
        schedules the dispatcher, so its events are in before any lease's)."""
        self.ctx.wake_after_commit({t.queue for t in tasks if t.state == State.PENDING}, then=then)
        if self.ctx.hooks.wants_events:
            for kind, state in (("enqueued", None), ("scheduled", State.SCHEDULED), ("canceled", State.CANCELED)):
                chosen = [
                    t
                    for t in tasks
                    if (t.state == state if state else t.state not in (State.SCHEDULED, State.CANCELED))
                ]
                self.ctx.emit(kind, chosen, now, then=then)


def _with_index(error: ConveyorError | None, index: int) -> ConveyorError | None:
    """The error of a batch item, naming its position in the request."""
    if isinstance(error, InvalidArgument):
        return InvalidArgument(error.field, error.reason, index=index)
    if isinstance(error, DuplicateTask):
        return DuplicateTask(error.unique_key, error.holder_id, index=index)
    return error


def ready_state(task: Task | NewTask, now: datetime) -> State:
    """The state of a task whose dependencies are all satisfied."""
    if task.group:
        return State.AGGREGATING
    if task.due_at > now:
        return State.SCHEDULED
    return State.PENDING
