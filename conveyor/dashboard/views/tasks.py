"""Tasks: filtered cursor-paged list, bulk actions, detail page and per-task actions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from conveyor.broker import IdResult, get_broker
from conveyor.broker.filters import parse_filter
from conveyor.conf import conveyor_settings
from conveyor.dashboard.present import STATE_NAMES, present_body, present_payload
from conveyor.dashboard.views.common import mutation, page, redirect_back, report, staff
from conveyor.durations import parse_duration
from conveyor.exceptions import ConveyorError, InvalidArgument, TaskNotFound
from conveyor.models import BulkJob, Task, TaskDependency
from conveyor.states import ADMIN_FROM, State

PAGE_SIZES = (25, 50, 100, 200)
TRAIL_MAX = 50
BULK_ACTIONS = {
    # action -> (verb for messages, past tense)
    "run": ("run", "made due now"),
    "cancel": ("cancel", "canceled"),
    "archive": ("archive", "archived"),
    "delete": ("delete", "deleted"),
}
DEPENDENCY_SHOW_MAX = 200
BULK_JOBS_SHOWN = 5


def _filters(request: HttpRequest) -> dict[str, str]:
    return {key: request.GET.get(key, "").strip() for key in ("queue", "state", "type", "q", "where", "contains")}


def _query(**params: Any) -> str:
    clean = {k: v for k, v in params.items() if v not in (None, "", [])}
    return "?" + urlencode(clean) if clean else "?"


@staff("task")
def tasks(request: HttpRequest) -> HttpResponse:
    broker = get_broker()
    filters = _filters(request)
    try:
        limit = int(request.GET.get("limit") or 50)
    except ValueError:
        limit = 50
    if limit not in PAGE_SIZES:
        limit = 50
    after = request.GET.get("after", "").strip()
    trail = [t for t in request.GET.get("trail", "").split(",") if t][-TRAIL_MAX:]
    error = None
    try:
        result = broker.list_tasks(
            queue=filters["queue"] or None,
            state=filters["state"] or None,
            type=filters["type"] or None,
            search=filters["q"] or None,
            where=filters["where"] or None,
            contains=filters["contains"] or None,
            limit=limit,
            page_token=after or None,
        )
        rows, next_token = result.tasks, result.next_page_token
    except ConveyorError as exc:
        rows, next_token, error = [], None, exc.message
    stats = broker.queue_stats()
    base = {**filters, "limit": limit if limit != 50 else None}
    next_url = None
    if next_token:
        # The trail holds the cursor of every earlier page, so "previous" works too.
        next_url = _query(**base, after=next_token, trail=",".join([*trail, after]) if after else None)
    prev_url = None
    if after:
        prev_url = _query(**base, after=trail[-1] if trail else None, trail=",".join(trail[:-1]) or None)
    known_total = None
    searched = filters["type"] or filters["q"] or filters["where"] or filters["contains"]
    if filters["state"] and not searched:
        known_total = sum(
            q.counts.get(filters["state"], 0) for q in stats if not filters["queue"] or q.name == filters["queue"]
        )
    elif not filters["state"] and not searched:
        known_total = sum(q.total for q in stats if not filters["queue"] or q.name == filters["queue"])
    # Jobs before counts: a page showing a job done shows the counts after it.
    bulk_jobs = broker.bulk_jobs(BULK_JOBS_SHOWN)
    matching = _matching_counts(broker, filters) if any(filters.values()) and error is None else None
    return page(
        request,
        "conveyor/dashboard/tasks.html",
        {
            "matching": matching,
            "bulk_jobs": bulk_jobs,
            # The page reads a running job's progress back every second, and stops once none runs.
            "bulk_running": any(j.state == BulkJob.RUNNING for j in bulk_jobs),
            "rows": rows,
            "filters": filters,
            "filtered": any(filters.values()),
            "queue_names": [q.name for q in stats],
            "states": STATE_NAMES,
            "limit": limit,
            "page_sizes": PAGE_SIZES,
            "page_number": len(trail) + (2 if after else 1),
            "next_url": next_url,
            "prev_url": prev_url,
            "first_url": _query(**base) if after else None,
            "known_total": known_total,
            "error": error,
        },
        nav="tasks",
    )


def _matching_counts(broker: Any, filters: dict[str, str]) -> dict[str, int]:
    """What each bulk action would act on now: the counts the operator confirms."""
    selected = parse_filter(_filter_params(filters))
    return {action: broker.count_matching(action, selected) for action in BULK_ACTIONS}


def _filter_params(filters: dict[str, str]) -> dict[str, str]:
    """The page's filters as the task list's parameters (the search box is ``q`` here)."""
    names = {"q": "search"}
    return {names.get(k, k): v for k, v in filters.items() if v}


@mutation("task", action=lambda request, _kwargs: task_permission(request.POST.get("action", "")))
def tasks_bulk(request: HttpRequest) -> HttpResponse:
    """Start a bulk action on every task the page's filters match (confirmed with its count)."""
    action = request.POST.get("action", "")
    filters = {key: request.POST.get(key, "").strip() for key in ("queue", "state", "type", "q", "where", "contains")}
    back = reverse("conveyor:dashboard:tasks") + _query(**filters)
    try:
        job = get_broker().start_bulk(action, _filter_params(filters), by=request.user.get_username())
    except ConveyorError as exc:
        report(request, exc, f"{action} all matching tasks")
    else:
        verb = BULK_ACTIONS[action][0]
        messages.success(request, f"Started: {verb} {job.total} matching task{'s' if job.total != 1 else ''}.")
    return HttpResponseRedirect(back)


def summarize(request: HttpRequest, action: str, results: list[IdResult]) -> None:
    verb, done = BULK_ACTIONS[action]
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    if ok:
        running = [r for r in ok if r.task is not None and r.task.state == State.ACTIVE]
        text = f"{len(ok)} task{'s' if len(ok) != 1 else ''} {done}."
        if action == "cancel" and running:
            text += f" {len(running)} running: the worker was asked to stop and the attempt ends archived."
        messages.success(request, text)
    if failed:
        shown = "; ".join(r.error.message for r in failed[:5] if r.error is not None)
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        messages.error(request, f"Could not {verb} {len(failed)} task{'s' if len(failed) != 1 else ''}: {shown}{more}")


def task_permission(action: str) -> str:
    """Deleting a task needs ``delete_task``, as in the admin; every other action ``change_task``."""
    return "delete" if action == "delete" else "change"


@mutation("task", action=lambda request, _kwargs: task_permission(request.POST.get("action", "")))
def tasks_action(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action", "")
    ids = [i for i in request.POST.getlist("ids") if i]
    back = reverse("conveyor:dashboard:tasks")
    if action not in BULK_ACTIONS:
        messages.error(request, f"Unknown action {action!r}.")
        return redirect_back(request, back)
    if not ids:
        messages.error(request, "Select at least one task first.")
        return redirect_back(request, back)
    try:
        results = getattr(get_broker(), f"{action}_tasks")(ids)
    except ConveyorError as exc:
        report(request, exc, f"{action} the selected tasks")
    else:
        summarize(request, action, results)
    return redirect_back(request, back)


def _dependencies(task: Task) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, int]:
    up_edges = list(TaskDependency.objects.filter(task_id=task.id).order_by("id")[:DEPENDENCY_SHOW_MAX])
    up_total = (
        TaskDependency.objects.filter(task_id=task.id).count()
        if len(up_edges) == DEPENDENCY_SHOW_MAX
        else len(up_edges)
    )
    states = dict(Task.objects.filter(id__in=[e.depends_on_id for e in up_edges]).values_list("id", "state"))
    upstream = [
        {
            "id": e.depends_on_id,
            "state": states.get(e.depends_on_id),
            "on_failure": e.on_failure,
            "resolution": e.resolution,
        }
        for e in up_edges
    ]
    down_edges = list(
        TaskDependency.objects.filter(depends_on_id=task.id)
        .select_related("task")
        .order_by("task_id")[:DEPENDENCY_SHOW_MAX]
    )
    down_total = (
        TaskDependency.objects.filter(depends_on_id=task.id).count()
        if len(down_edges) == DEPENDENCY_SHOW_MAX
        else len(down_edges)
    )
    downstream = [
        {
            "id": e.task_id,
            "state": e.task.state,
            "type": e.task.type,
            "on_failure": e.on_failure,
            "resolution": e.resolution,
        }
        for e in down_edges
    ]
    return upstream, downstream, up_total, down_total


@staff("task")
def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    try:
        task = get_broker().get_task(task_id)
    except TaskNotFound:
        # The page's own live refresh learns it is gone from a header, not a
        # 404 the browser would log as a console error.
        refresh = request.headers.get("X-Dashboard-Refresh") == "1"
        response = page(
            request,
            "conveyor/dashboard/task_missing.html",
            {"task_id": task_id},
            nav="tasks",
            status=200 if refresh else 404,
        )
        response["X-Conveyor-Gone"] = "1"
        return response
    upstream, downstream, up_total, down_total = _dependencies(task)
    allowed = {action: task.state in states for action, states in ADMIN_FROM.items()}
    return page(
        request,
        "conveyor/dashboard/task_detail.html",
        {
            "t": task,
            "payload": present_payload(task),
            "result": present_body(task.result, "application/json") if task.result is not None else None,
            "upstream": upstream,
            "downstream": downstream,
            "up_total": up_total,
            "down_total": down_total,
            "allowed": allowed,
            "attempts": task.max_retry + 1,
            "history": get_broker().task_attempts(task.id),
            "kept": conveyor_settings.ATTEMPTS_KEPT,
            "related_ids": [task.id, *(d["id"] for d in upstream), *(d["id"] for d in downstream)],
        },
        nav="tasks",
    )


def _reschedule_args(request: HttpRequest) -> dict[str, Any]:
    delay = request.POST.get("process_in", "").strip()
    at = request.POST.get("process_at", "").strip()
    if bool(delay) == bool(at):
        raise InvalidArgument("process_at", "give either a delay or a time (UTC), not both")
    if delay:
        try:
            return {"process_in": parse_duration(delay)}
        except ValueError as exc:
            raise InvalidArgument("process_in", str(exc)) from None
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise InvalidArgument("process_at", f"{at!r} is not a date and time") from None
    return {"process_at": when.replace(tzinfo=UTC) if when.tzinfo is None else when}


@mutation("task", action=lambda _request, kwargs: task_permission(kwargs["action"]))
def task_action(request: HttpRequest, task_id: str, action: str) -> HttpResponse:
    broker = get_broker()
    detail = reverse("conveyor:dashboard:task", args=[task_id])
    try:
        if action == "cancel":
            task = broker.cancel_task(task_id)
            if task.state == State.ACTIVE:
                messages.success(request, "Cancel requested: the worker was asked to stop; the attempt ends archived.")
            else:
                messages.success(request, f"Task {task_id} canceled.")
        elif action == "run":
            broker.run_task(task_id)
            messages.success(request, f"Task {task_id} is due now.")
        elif action == "archive":
            broker.archive_task(task_id)
            messages.success(request, f"Task {task_id} archived.")
        elif action == "delete":
            broker.delete_task(task_id)
            messages.success(request, f"Task {task_id} deleted.")
            return redirect_back(request, reverse("conveyor:dashboard:tasks"))
        elif action == "reschedule":
            task = broker.reschedule_task(task_id, **_reschedule_args(request))
            messages.success(request, f"Task {task_id} rescheduled ({task.state}).")
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except TaskNotFound as exc:
        report(request, exc, f"{action} task {task_id}")
        return HttpResponseRedirect(reverse("conveyor:dashboard:tasks"))
    except ConveyorError as exc:
        report(request, exc, f"{action} task {task_id}")
    return redirect_back(request, detail)
