"""Channel-layer group names. Channels allows [A-Za-z0-9._-], under 100 chars."""

from __future__ import annotations

import hashlib

EVENTS_GROUP = "conveyor.events"
CONTROL_GROUP = "conveyor.control"
_PREFIX = "conveyor.q."


def queue_group(queue: str) -> str:
    """The group every node's dispatcher for *queue* joins."""
    name = _PREFIX + queue
    if len(name) < 100:
        return name
    return _PREFIX + "h." + hashlib.sha256(queue.encode()).hexdigest()[:40]
