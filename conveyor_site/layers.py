"""The channel layer a cluster uses (settings and tests build it the same way)."""

from __future__ import annotations

from typing import Any


def redis_channel_layer(url: str, prefix: str = "conveyor") -> dict[str, Any]:
    """CHANNEL_LAYERS["default"] for Redis at *url*.

    Redis pub/sub: a wake is one PUBLISH and arrives pushed, where the
    list-based layer spends four round trips to send and three to receive
    (0.27 vs 0.70 ms from send to receive here). What pub/sub gives up --
    messages published while a node is reconnecting are not kept for it --
    costs Conveyor nothing: every message it sends is a hint that the
    database and the sweeps back up (docs/architecture.md, "Wakes").
    """
    return {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{"address": url, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "prefix": prefix,
        },
    }
