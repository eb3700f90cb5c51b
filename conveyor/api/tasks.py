"""Task endpoints: enqueue (one, batch, tx) and read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from conveyor.api import render, schemas
from conveyor.api.errors import error_body
from conveyor.api.views import ApiView
from conveyor.broker import get_broker, parse
from conveyor.conf import conveyor_settings
from conveyor.exceptions import ConveyorError, DuplicateTask, InvalidArgument
from conveyor.tokens import PRODUCE, READ


class EnqueueView(ApiView):
    producer = True

    @extend_schema(
        operation_id="list_tasks",
        parameters=[
            OpenApiParameter("queue", schemas.OPTIONAL_QUEUE),
            OpenApiParameter("state", str, enum=["", *schemas.STATES], description="empty: any"),
            OpenApiParameter("type", str),
            OpenApiParameter("search", str, description="an id, id prefix, unique key or concurrency key"),
            OpenApiParameter(
                "where",
                str,
                description="conditions inside tasks, joined by `and`: `payload.<path> = <value>` (a JSON scalar "
                "or a bare word) and `metadata.<key> = <value>`, e.g. `payload.user_id = 42 and metadata.tenant = "
                "acme`. Payloads sealed at rest or end to end never match (docs/search.md)",
            ),
            OpenApiParameter(
                "contains", str, description="a substring of the payload's text (a scan: slow on big tables)"
            ),
            OpenApiParameter(
                "limit", {"type": "integer", "minimum": 0, "maximum": 1000}, description="1-1000; 0 or absent: 50"
            ),
            OpenApiParameter("page_token", str, description="next_page_token of the previous page"),
        ],
        responses={200: schemas.TaskPage},
        tags=["tasks"],
    )
    def get(self, request: Request) -> Response:
        """List tasks newest first; pass `next_page_token` back as `page_token` for the next page."""
        q = request.query_params
        limit = q.get("limit")
        if limit is not None and not (limit.isascii() and limit.isdigit()):
            raise InvalidArgument("limit", "must be an integer")
        page = get_broker().list_tasks(
            queue=q.get("queue") or None,
            state=q.get("state") or None,
            type=q.get("type") or None,
            search=q.get("search") or None,
            where=q.get("where") or None,
            contains=q.get("contains") or None,
            limit=int(limit) if limit is not None else None,
            page_token=q.get("page_token") or None,
        )
        return Response({"tasks": [render.task(t) for t in page.tasks], "next_page_token": page.next_page_token})

    @extend_schema(
        operation_id="enqueue_task",
        request=schemas.EnqueueRequest,
        responses={
            201: schemas.Task,
            200: OpenApiResponse(schemas.Task, "the id existed: the stored task, unchanged"),
            409: OpenApiResponse(schemas.Error, "already_exists: a live task holds the unique key"),
        },
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        """Enqueue one task. Re-sending an existing id returns the stored task (200)."""
        spec = parse.parse_task(request.data)
        result = get_broker().enqueue_one(spec)
        if result.error is not None:
            raise result.error
        return Response(render.task(result.task), status=201 if result.created else 200)  # type: ignore[arg-type]


def with_index(error: ConveyorError, index: int) -> ConveyorError:
    """The error of a batch item, naming its position in the request."""
    if isinstance(error, InvalidArgument):
        return InvalidArgument(error.field, error.reason, index=index)
    if isinstance(error, DuplicateTask):
        return DuplicateTask(error.unique_key, error.holder_id, index=index)
    error.details["index"] = index
    return error


def task_items(data: Any) -> list[Any]:
    """The ``tasks`` list of a batch or tx body, 1 to BATCH_MAX_ITEMS long."""
    items = parse.parse_task_list(data)
    limit = conveyor_settings.BATCH_MAX_ITEMS
    if not items:
        raise InvalidArgument("tasks", "must contain at least one task")
    if len(items) > limit:
        raise InvalidArgument("tasks", f"must contain at most {limit} tasks")
    return items


class EnqueueBatchView(ApiView):
    producer = True

    @extend_schema(
        operation_id="enqueue_batch",
        request=schemas.TaskList,
        responses={200: schemas.BatchResults},
        tags=["tasks"],
        parameters=[
            OpenApiParameter(
                "Prefer",
                str,
                OpenApiParameter.HEADER,
                enum=[render.MINIMAL],
                description="`return=minimal`: each stored item answers `id` and `state` instead of the whole "
                "`task` (a smaller answer, for producers that keep only the ids)",
            )
        ],
    )
    def post(self, request: Request) -> Response:
        """Enqueue up to 1000 tasks; each item succeeds or fails on its own (`index` names it)."""
        minimal = render.wants_minimal(request.headers.get("Prefer"))
        headers = {"Preference-Applied": render.MINIMAL} if minimal else None
        return Response(enqueue_batch(request.data, minimal), headers=headers)


def enqueue_batch(data: Any, minimal: bool = False) -> dict[str, Any]:
    """The batch endpoint's work and answer (the view and the node's fast path
    share it); *minimal*: a stored item answers its ``id`` and ``state`` only."""
    results = enqueue_each(
        task_items(data),
        parse.parse_task,
        error_body,
        minimal_item if minimal else full_item,
    )
    return {"results": results}


def full_item(result: Any) -> dict[str, Any]:
    return {"created": result.created, "task": render.task(result.task)}


def minimal_item(result: Any) -> dict[str, Any]:
    return {"created": result.created, "id": result.task.id, "state": str(result.task.state)}


def enqueue_each(
    items: list[Any],
    to_spec: Callable[[Any], Any],
    error: Callable[[ConveyorError], dict[str, Any]],
    stored: Callable[[Any], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Enqueue a batch item by item: one ``{"index", ...}`` answer per item.

    A refused item (bad input, or refused by the broker) gets ``error`` of
    its exception renumbered to the request's index; the others ``stored``
    of their broker result. REST and Connect differ only in these three.
    """
    out: list[dict[str, Any]] = [{} for _ in items]
    valid: list[tuple[int, Any]] = []
    for i, item in enumerate(items):
        try:
            valid.append((i, to_spec(item)))
        except InvalidArgument as exc:
            out[i] = {"index": i, "error": error(with_index(exc, i))}
    results = get_broker().enqueue_batch([spec for _, spec in valid]) if valid else []
    for (index, _), result in zip(valid, results, strict=True):
        if result.error is not None:
            # The broker numbered the items it saw; name the request's index.
            out[index] = {"index": index, "error": error(with_index(result.error, index))}
        else:
            out[index] = {"index": index, **stored(result)}
    return out


class EnqueueTxView(ApiView):
    producer = True

    @extend_schema(
        operation_id="enqueue_tx",
        request=schemas.TaskList,
        responses={
            201: schemas.TaskListResponse,
            409: OpenApiResponse(schemas.Error, "already_exists: item `index` collides on a unique key"),
        },
        tags=["tasks"],
    )
    def post(self, request: Request) -> Response:
        """Enqueue up to 1000 tasks atomically: all are stored or none (an error names the item's `index`)."""
        specs = []
        for i, item in enumerate(task_items(request.data)):
            try:
                specs.append(parse.parse_task(item))
            except InvalidArgument as exc:
                raise with_index(exc, i) from None
        tasks = get_broker().enqueue_tx(specs)
        return Response({"tasks": [render.task(t) for t in tasks]}, status=201)


class TaskDetailView(ApiView):
    read_scopes = (READ, PRODUCE)  # a producer reads back the tasks it enqueued

    @extend_schema(operation_id="get_task", responses={200: schemas.TaskDetail}, tags=["tasks"])
    def get(self, request: Request, task_id: str) -> Response:
        """Read one task, with its attempt history (the last ATTEMPTS_KEPT, oldest first)."""
        broker = get_broker()
        task = broker.get_task(task_id)
        return Response(render.task_detail(task, broker.task_attempts(task_id)))

    @extend_schema(
        operation_id="delete_task",
        responses={204: None, 409: OpenApiResponse(schemas.Error, "failed_precondition: the task is active")},
        tags=["tasks"],
    )
    def delete(self, request: Request, task_id: str) -> Response:
        """Delete a task in any state but active, and not while unfinished tasks wait on it."""
        get_broker().delete_task(task_id)
        return Response(status=204)
