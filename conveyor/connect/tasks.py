"""TaskService and WebhookService: each RPC a sync function of its request message.

They run on a database thread (``conveyor.connect.app``) and reach task
state only through the broker, as the REST views do.
"""

from __future__ import annotations

from typing import Any

from conveyor.api.tasks import enqueue_each, task_items, with_index
from conveyor.broker import get_broker
from conveyor.broker.types import TaskSpec
from conveyor.connect.convert import task_info, task_spec
from conveyor.connect.errors import fields_named, item_error
from conveyor.exceptions import InvalidArgument
from conveyor.v1 import service_pb2 as pb
from conveyor.webhooks import callbacks

# The broker's names for EnqueueRequest fields that the message names otherwise.
ENQUEUE_NAMES = {"id": "task_id", "retry_policy.kind": "retry_policy.strategy", "retry_policy.cap": "retry_policy.max"}


def spec_of(request: pb.EnqueueRequest) -> TaskSpec:
    with fields_named(ENQUEUE_NAMES):
        return task_spec(request)


def enqueue(request: pb.EnqueueRequest) -> pb.EnqueueResponse:
    with fields_named(ENQUEUE_NAMES):
        result = get_broker().enqueue_one(task_spec(request))
        if result.error is not None:
            raise result.error
    return pb.EnqueueResponse(task=task_info(result.task))


def enqueue_batch(request: pb.EnqueueBatchRequest) -> pb.EnqueueBatchResponse:
    """Each item succeeds or fails alone; a refused item's error says why."""
    with fields_named(ENQUEUE_NAMES):
        answers = enqueue_each(
            task_items({"tasks": list(request.tasks)}),
            spec_of,
            lambda exc: {"error": item_error(exc)},
            lambda result: {"task": task_info(result.task)},
        )
    results = [pb.EnqueueResult(task=a.get("task"), error=a["error"]["error"] if "error" in a else "") for a in answers]
    return pb.EnqueueBatchResponse(results=results)


def enqueue_tx(request: pb.EnqueueTxRequest) -> pb.EnqueueTxResponse:
    specs = []
    with fields_named(ENQUEUE_NAMES):
        for i, item in enumerate(task_items({"tasks": list(request.tasks)})):
            try:
                specs.append(task_spec(item))
            except InvalidArgument as exc:
                raise with_index(exc, i) from None
        tasks = get_broker().enqueue_tx(specs)
    return pb.EnqueueTxResponse(tasks=[task_info(t) for t in tasks])


def required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument(field, "is required")
    return value


def get_task(request: pb.GetTaskRequest) -> pb.GetTaskResponse:
    return pb.GetTaskResponse(task=task_info(get_broker().get_task(required(request.id, "id"))))


TASK_SERVICE = {
    "enqueue": enqueue,
    "enqueue_batch": enqueue_batch,
    "enqueue_tx": enqueue_tx,
    "get_task": get_task,
}


# -- WebhookService ----------------------------------------------------------------------

OUTCOMES = {
    pb.TASK_OUTCOME_SUCCESS: "success",
    pb.TASK_OUTCOME_RETRY: "retry",
    pb.TASK_OUTCOME_SKIP_RETRY: "skip_retry",
}


def heartbeat(request: pb.WebhookHeartbeatRequest) -> pb.WebhookHeartbeatResponse:
    callbacks.heartbeat(request.lease_token)
    return pb.WebhookHeartbeatResponse()


def report_result(request: pb.WebhookReportResultRequest) -> pb.WebhookReportResultResponse:
    outcome = OUTCOMES.get(request.outcome)
    callbacks.report_result(request.lease_token, outcome, request.error_msg, request.result or None)
    return pb.WebhookReportResultResponse()


WEBHOOK_SERVICE: dict[str, Any] = {"heartbeat": heartbeat, "report_result": report_result}
