"""Broker hooks for processes that are not a node (CLI, Django code, admin).

They reach running nodes through the channel layer: a wake to the queue's
group, events to the events group, cancel requests to the control group.
With the in-memory layer there is nobody else to reach, so they stay quiet
(a node notices such changes through its sweeps).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync

from conveyor.broker.hooks import InlineHooks
from conveyor.dispatch.groups import CONTROL_GROUP, EVENTS_GROUP, queue_group
from conveyor.events import Event

logger = logging.getLogger("conveyor.dispatch")


def wake_message(queue: str, at: datetime | None = None) -> dict[str, Any]:
    return {"type": "conveyor.wake", "queue": queue, "at": at.timestamp() if at else None}


class ChannelLayerHooks(InlineHooks):
    def __init__(self) -> None:
        self._layer: Any = None

    @property
    def layer(self) -> Any:
        if self._layer is None:
            from channels.layers import InMemoryChannelLayer, get_channel_layer

            layer = get_channel_layer()
            self._layer = False if layer is None or isinstance(layer, InMemoryChannelLayer) else layer
        return self._layer

    @property
    def wants_events(self) -> bool:  # type: ignore[override]
        return bool(self.layer)

    def _send(self, group: str, message: dict[str, Any]) -> None:
        if not self.layer:
            return
        try:
            async_to_sync(self.layer.group_send)(group, message)
        except Exception:  # best effort: a sweep recovers a lost message
            logger.warning("could not reach the channel layer for %s", group, exc_info=True)

    def wake(self, queues: Iterable[str], at: datetime | None = None) -> None:
        for queue in queues:
            self._send(queue_group(queue), wake_message(queue, at))

    def publish(self, events: Sequence[Event]) -> None:
        self._send(EVENTS_GROUP, {"type": "conveyor.events", "events": [e.as_dict() for e in events]})

    def cancel_running(self, refs: Sequence[tuple[str, str]]) -> None:
        self._send(CONTROL_GROUP, {"type": "conveyor.cancel", "refs": [list(r) for r in refs]})


def fire_group_message(queue: str, group: str, task_type: str) -> dict[str, Any]:
    return {"type": "conveyor.fire_group", "queue": queue, "group": group, "task_type": task_type}


def send_to_queue(queue: str, message: dict[str, Any]) -> None:
    """Send *message* to every node's dispatcher of *queue* (from sync code)."""
    hooks = ChannelLayerHooks()
    hooks._send(queue_group(queue), message)
