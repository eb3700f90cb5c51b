"""Log records a machine can read: JSON lines with Conveyor's fields, and an HTTP access log.

``CONVEYOR_LOG_FORMAT=json`` (the standalone project) or, in a host project,
a ``LOGGING`` formatter of class ``conveyor.logs.JsonFormatter`` with the
``conveyor.logs.NodeFilter`` filter on its handler turns every record into
one JSON object: ``time``, ``level``, ``logger``, ``message``, the ``node``
that wrote it, and ``task_id`` / ``queue`` where a record is about one
(passed as ``extra=log_fields(...)``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

ACCESS = logging.getLogger("conveyor.access")


def log_fields(*, task_id: str | None = None, queue: str | None = None) -> dict[str, str]:
    """``extra=`` for a record about a task or a queue (the fields JSON logs carry)."""
    fields = {}
    if task_id is not None:
        fields["task_id"] = task_id
    if queue is not None:
        fields["queue"] = queue
    return fields


class JsonFormatter(_BaseJsonFormatter):
    """python-json-logger's formatter with Conveyor's field names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"})
        if not args and "fmt" not in kwargs:
            args = ("%(asctime)s %(levelname)s %(name)s %(message)s",)
        super().__init__(*args, **kwargs)


_node: dict[str, str] = {}


def set_node(node_id: str) -> None:
    """Name the node this process runs (``conveyord`` calls it once the node is up)."""
    _node["id"] = node_id


class NodeFilter(logging.Filter):
    """Add the id of the node this process runs (``node``), once it runs one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "id" in _node and not hasattr(record, "node"):
            record.node = _node["id"]
        return True


class AccessLog:
    """ASGI middleware: one ``conveyor.access`` INFO record per HTTP request
    (method, path, status, duration_ms, client), when ``CONVEYOR["ACCESS_LOG"]`` is on."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 0}

        async def sending(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                status["code"] = message.get("status", 0)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = scope.get("client") or ("", 0)
            duration = (time.perf_counter() - started) * 1000
            ACCESS.info(
                "%s %s %s %.1fms",
                scope.get("method", ""),
                scope.get("path", ""),
                status["code"],
                duration,
                extra={
                    "method": scope.get("method", ""),
                    "path": scope.get("path", ""),
                    "status": status["code"],
                    "duration_ms": round(duration, 3),
                    "client": client[0],
                },
            )
