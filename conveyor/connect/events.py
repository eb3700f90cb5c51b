"""AdminService.WatchEvents: the node's live lifecycle events as a Connect server stream.

The same events as /ws/events and /api/v1/events (``conveyor.api.events``),
best effort, from the moment of the call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from conveyor.api.events import EventFilter, subscribe
from conveyor.connect.convert import STATES, enum_value
from conveyor.v1 import service_pb2 as pb
from conveyor.v1 import task_pb2 as tpb

# Our event kinds as the contract's transitions. A promotion (scheduled or
# blocked task made due) is an ENQUEUED there; a deletion has no type, so a
# watcher does not see it.
EVENT_TYPES = {
    "enqueued": tpb.TASK_EVENT_TYPE_ENQUEUED,
    "promoted": tpb.TASK_EVENT_TYPE_ENQUEUED,
    "scheduled": tpb.TASK_EVENT_TYPE_SCHEDULED,
    "leased": tpb.TASK_EVENT_TYPE_LEASED,
    "completed": tpb.TASK_EVENT_TYPE_COMPLETED,
    "retried": tpb.TASK_EVENT_TYPE_RETRIED,
    "archived": tpb.TASK_EVENT_TYPE_ARCHIVED,
    "canceled": tpb.TASK_EVENT_TYPE_CANCELED,
    "released": tpb.TASK_EVENT_TYPE_RELEASED,
}
KINDS_OF = {number: [k for k, n in EVENT_TYPES.items() if n == number] for number in set(EVENT_TYPES.values())}


def event_filter(request: pb.WatchEventsRequest) -> EventFilter:
    kinds = [
        kind
        for i, number in enumerate(request.event_types)
        if number != tpb.TASK_EVENT_TYPE_UNSPECIFIED
        for kind in enum_value(KINDS_OF, number, f"event_types[{i}]")
    ]
    return EventFilter(list(request.queues), [], kinds or list(EVENT_TYPES))


def task_event(event: dict[str, Any]) -> tpb.TaskEvent:
    occurred = Timestamp()
    occurred.FromJsonString(event["at"])
    return tpb.TaskEvent(
        id=event["task_id"],
        queue=event["queue"],
        type=event["type"],
        state=STATES[event["state"]],
        event_type=EVENT_TYPES[event["kind"]],
        occurred_at=occurred,
        attempt=max(0, event["attempt"] - 1),  # the contract's attempt is the retry count
        last_error=event["last_error"],
    )


async def watch_events(request: pb.WatchEventsRequest, ctx: Any) -> AsyncIterator[tpb.TaskEvent]:
    async for events in subscribe(event_filter(request)):
        for event in events:
            yield task_event(event)
