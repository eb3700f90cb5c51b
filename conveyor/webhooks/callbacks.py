"""WebhookService: the callbacks of asynchronous webhook deliveries (lease token auth)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WEBHOOK_SERVICE: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
