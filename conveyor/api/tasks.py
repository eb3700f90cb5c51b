"""Task endpoints: enqueue (one, batch, tx) and read."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conveyor.api import parse, render, schemas
from conveyor.api.errors import error_body
from conveyor.broker import get_broker
from conveyor.exceptions import InvalidArgument


class EnqueueView(APIView):
    producer = True

    @extend_schema(
        operation_id="list_tasks",
        parameters=[
            OpenApiParameter("queue", str),
            OpenApiParameter("state", str, enum=schemas.STATES),
            OpenApiParameter("type", str),
            OpenApiParameter("search", str, description="an id, id prefix, unique key or concurrency key"),
            OpenApiParameter("limit", int, description="1-1000, default 50"),
            OpenApiParameter("page_token", str),
        ],
        responses={200: schemas.TaskPage, 400: schemas.Error},
        tags=["tasks"],
    )
    def get(self, request: Request) -> Response:
        """List tasks newest first; pass `next_page_token` back as `page_token` for the next page."""
        q = request.query_params
        limit = q.get("limit")
        if limit is not None and not limit.isdigit():
            raise InvalidArgument("limit", "must be an integer")
        page = get_broker().list_tasks(
            queue=q.get("queue") or None,
            state=q.get("state") or None,
            type=q.get("type") or None,
            search=q.get("search") or None,
            limit=int(limit) if limit is not None else None,
            page_token=q.get("page_token") or None,
        )
        return Response({"tasks": [render.task(t) for t in page.tasks], "next_page_token": page.next_page_token})

    @extend_schema(
        operation_id="enqueue_task",
        request=schemas.EnqueueRequest,
        responses={201: schemas.Task, 200: OpenApiResponse(schemas.Task, "the id existed: the stored task"), 400: schemas.Error, 409: schemas.Error},
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        """Enqueue one task. Re-sending an existing id returns the stored task (200)."""
        spec = parse.parse_task(request.data)
        result = get_broker().enqueue_one(spec)
        if result.error is not None:
            raise result.error
        return Response(render.task(result.task), status=201 if result.created else 200)  # type: ignore[arg-type]


class EnqueueBatchView(APIView):
    producer = True

    @extend_schema(
        operation_id="enqueue_batch",
        request=schemas.TaskList,
        responses={200: schemas.BatchResults, 400: schemas.Error},
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        """Enqueue up to 1000 tasks; each item succeeds or fails on its own."""
        items = parse.parse_task_list(request.data)
        specs: list[Any] = []
        errors: dict[int, InvalidArgument] = {}
        for i, item in enumerate(items):
            try:
                specs.append(parse.parse_task(item))
            except InvalidArgument as exc:
                errors[i] = InvalidArgument(exc.field, exc.reason, index=i)
                specs.append(None)
        valid = [(i, s) for i, s in enumerate(specs) if s is not None]
        stored = get_broker().enqueue_batch([s for _, s in valid]) if valid else []
        out: list[dict[str, Any]] = [{} for _ in items]
        for (index, _), result in zip(valid, stored, strict=True):
            if result.error is not None:
                result.error.details["index"] = index
                out[index] = {"index": index, "error": error_body(result.error)}
            else:
                out[index] = {"index": index, "created": result.created, "task": render.task(result.task)}  # type: ignore[arg-type]
        for index, error in errors.items():
            out[index] = {"index": index, "error": error_body(error)}
        if not items:
            raise InvalidArgument("tasks", "must contain at least one task")
        return Response({"results": out})


class EnqueueTxView(APIView):
    producer = True

    @extend_schema(
        operation_id="enqueue_tx",
        request=schemas.TaskList,
        responses={201: schemas.TaskListResponse, 400: schemas.Error, 409: schemas.Error},
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        """Enqueue up to 1000 tasks atomically: all are stored or none."""
        items = parse.parse_task_list(request.data)
        specs = []
        for i, item in enumerate(items):
            try:
                specs.append(parse.parse_task(item))
            except InvalidArgument as exc:
                raise InvalidArgument(exc.field, exc.reason, index=i) from None
        tasks = get_broker().enqueue_tx(specs)
        return Response({"tasks": [render.task(t) for t in tasks]}, status=201)


class TaskDetailView(APIView):
    @extend_schema(operation_id="get_task", responses={200: schemas.Task, 404: schemas.Error}, tags=["tasks"])
    def get(self, request: Request, task_id: str) -> Response:
        """Read one task."""
        return Response(render.task(get_broker().get_task(task_id)))

    @extend_schema(operation_id="delete_task", responses={204: None, 404: schemas.Error, 409: schemas.Error}, tags=["tasks"])
    def delete(self, request: Request, task_id: str) -> Response:
        """Delete a task in any state but active."""
        get_broker().delete_task(task_id)
        return Response(status=204)
