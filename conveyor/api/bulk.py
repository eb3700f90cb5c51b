"""Bulk actions on a filter over REST: count, start, follow (conveyor/broker/bulk.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from conveyor.api import render
from conveyor.api.admin import body
from conveyor.api.scopes import request_token
from conveyor.api.views import ApiView
from conveyor.broker import get_broker
from conveyor.broker.bulk import BULK_ACTIONS
from conveyor.broker.filters import TaskFilter, parse_filter
from conveyor.broker.parse import only_fields, require_object
from conveyor.models import BulkJob
from conveyor.tokens import require_queues

FILTER_FIELDS = ("queue", "state", "type", "search", "where", "contains")
FILTER_HELP = "the task list's filters: queue, state, type, search, where, contains (docs/search.md)"


def job_json(job: BulkJob) -> dict[str, Any]:
    return {
        "id": job.id, "action": job.action, "filter": job.filter, "state": job.state, "total": job.total,
        "done": job.done, "skipped": job.skipped, "failed": job.failed, "percent": job.percent,
        "created_by": job.created_by, "created_at": render.ts(job.created_at),
        "updated_at": render.ts(job.updated_at), "finished_at": render.ts(job.finished_at),
    }  # fmt: skip


def check_token_queue(request: Request, selected: TaskFilter) -> None:
    """A queue-limited token acts only on a filter of one of its queues."""
    require_queues(request_token(request), [selected.queue or "(every queue)"], "act on")


class BulkJobsView(ApiView):
    mutating = {"POST"}

    @extend_schema(operation_id="list_bulk_jobs", responses={200: OpenApiTypes.OBJECT}, tags=["tasks"])
    def get(self, request: Request) -> Response:
        """The newest 20 bulk jobs, with their progress."""
        return Response({"jobs": [job_json(j) for j in get_broker().bulk_jobs()]})

    @extend_schema(
        operation_id="start_bulk_job",
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiResponse(OpenApiTypes.OBJECT, "the job, counted and started")},
        tags=["tasks"],
        description='`{"action": "cancel" | "run" | "archive" | "delete", "filter": {...}}`: ' + FILTER_HELP,
    )
    def post(self, request: Request) -> Response:
        """Start an action on every task the filter matches now; batches run on the leader."""
        data = body(request, ("action", "filter"))
        params = only_fields(require_object(data.get("filter") or {}, "filter"), FILTER_FIELDS, "filter")
        check_token_queue(request, parse_filter(params))
        by = getattr(request.user, "username", "") or ""
        job = get_broker().start_bulk(data.get("action") or "", params, by=by)
        return Response(job_json(job), status=202)


class BulkJobView(ApiView):
    @extend_schema(operation_id="get_bulk_job", responses={200: OpenApiTypes.OBJECT}, tags=["tasks"])
    def get(self, request: Request, job_id: str) -> Response:
        """One bulk job and its progress."""
        return Response(job_json(get_broker().bulk_job(job_id)))


class TaskCountView(ApiView):
    @extend_schema(
        operation_id="count_tasks",
        parameters=[OpenApiParameter("action", str, enum=list(BULK_ACTIONS), required=True)],
        responses={200: OpenApiTypes.OBJECT},
        tags=["tasks"],
        description="How many tasks the filter (" + FILTER_HELP + ") matches that the action applies to.",
    )
    def get(self, request: Request) -> Response:
        """Count what a bulk action would act on now (the count to confirm)."""
        selected = parse_filter(request.query_params)
        return Response({"count": get_broker().count_matching(request.query_params.get("action", ""), selected)})
