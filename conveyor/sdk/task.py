"""What a handler receives: one task (or a batch of them) being executed."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.sdk.encryption import open_payload

if TYPE_CHECKING:
    from conveyor.sdk.worker import AsyncWorker


class Task:
    """A task handed to a handler.

    ``payload`` is the decoded JSON value for JSON payloads, else the raw
    bytes (also always available as ``raw_payload``). Sync handlers can poll
    ``cancelled``; async handlers get ``CancelledError`` instead.
    """

    def __init__(self, frame: dict[str, Any], queue: str, lease_id: str, worker: AsyncWorker | None) -> None:
        self.id: str = frame["task_id"]
        self.type: str = frame["task_type"]
        self.queue = queue
        self.lease_id = lease_id
        self.content_type: str = frame.get("content_type") or ""
        self.raw_payload: bytes = base64.b64decode(frame.get("payload") or "")
        self.attempt: int = frame.get("attempt", 1)
        self.max_retry: int = frame.get("max_retry", 0)
        self.priority: int = frame.get("priority", 4)
        self.metadata: dict[str, str] = frame.get("metadata") or {}
        deadline = frame.get("deadline")
        self.deadline: datetime | None = datetime.fromisoformat(deadline.replace("Z", "+00:00")) if deadline else None
        enqueued = frame.get("enqueued_at")
        self.enqueued_at: datetime | None = (
            datetime.fromisoformat(enqueued.replace("Z", "+00:00")) if enqueued else None
        )
        self._worker = worker
        # The session this attempt came on, as the API and dashboard name the worker.
        self.session_id: str | None = worker.session_id if worker is not None else None
        self._cancel = threading.Event()
        self.cancel_reason = ""
        self._payload: Any = _UNSET
        # Why a payload sealed end to end could not be opened (the handler then does not run).
        self.seal_error = ""

    def _open(self, encryptor: Any) -> None:
        """Open a payload its producer sealed end to end (``conveyor.sdk.encryption``)."""
        self.raw_payload, self.seal_error = open_payload(self.raw_payload, self.metadata, encryptor)

    @property
    def payload(self) -> Any:
        if self._payload is _UNSET:
            if "json" in self.content_type:
                self._payload = json.loads(self.raw_payload) if self.raw_payload else None
            else:
                self._payload = self.raw_payload
        return self._payload

    @property
    def cancelled(self) -> bool:
        """True once the server asked to cancel this task (or its deadline passed)."""
        return self._cancel.is_set()

    def progress(self, percent: float, message: str = "") -> None:
        """Report progress (0-100); safe to call from sync handlers' threads."""
        if self._worker is not None:
            self._worker._report_progress(self.id, percent, message)

    def _mark_cancelled(self, reason: str) -> None:
        self.cancel_reason = reason
        self._cancel.set()

    def __repr__(self) -> str:
        return f"<Task {self.type} {self.id} attempt {self.attempt}>"


class _Unset:
    pass


_UNSET = _Unset()


class Running:
    """Bookkeeping of one dispatched task (or batch) inside the worker."""

    def __init__(self, tasks: list[Task], batch_lease: str | None = None) -> None:
        self.tasks = tasks
        self.batch_lease = batch_lease
        self.future: asyncio.Future[Any] | None = None
        self.dropped = False  # the server no longer wants its result
        self.started = False  # its handler was called (else it waits in the prefetch window)
