"""What a handler receives: one task (or a batch of them) being executed."""

from __future__ import annotations

import asyncio
import binascii
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from conveyor.sdk.encryption import open_payload

if TYPE_CHECKING:
    from conveyor.sdk.worker import AsyncWorker

# json.loads(bytes) picks the encoding by the first bytes (RFC 4627's rule)
# on every call; a payload that starts with a non-NUL ASCII byte, followed
# by a non-NUL byte, is UTF-8 without a BOM by that rule, so it is decoded
# as such here and parsed by the module's decoder (the same result).
_json_text = json.JSONDecoder().decode


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 time as the node sends it (``Z`` for UTC), or None."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


class Task:
    """A task handed to a handler.

    ``payload`` is the decoded JSON value for JSON payloads, else the raw
    bytes (also always available as ``raw_payload``). Sync handlers can poll
    ``cancelled``; async handlers get ``CancelledError`` instead.
    """

    def __init__(self, frame: dict[str, Any], queue: str, lease_id: str, worker: AsyncWorker | None) -> None:
        get = frame.get
        self.id: str = frame["task_id"]
        self.type: str = frame["task_type"]
        self.queue = queue
        self.lease_id = lease_id
        self.content_type: str = get("content_type") or ""
        # What base64.b64decode does for a str, without its wrapper (ValueError alike).
        self.raw_payload: bytes = binascii.a2b_base64(get("payload") or "")
        self.attempt: int = get("attempt", 1)
        self.max_retry: int = get("max_retry", 0)
        self.priority: int = get("priority", 4)
        self.metadata: dict[str, str] = get("metadata") or {}
        deadline = get("deadline")
        self.deadline: datetime | None = parse_time(deadline) if deadline else None
        # Parsed when first read (most handlers never look).
        self._enqueued_text: str | None = get("enqueued_at")
        self._enqueued: Any = _UNSET
        self._worker = worker
        # The session this attempt came on, as the API and dashboard name the worker.
        self.session_id: str | None = worker.session_id if worker is not None else None
        # Set once, by the worker's loop; read from any thread (a plain
        # attribute: its read and write are atomic, as threading.Event's flag is).
        self._cancelled = False
        self.cancel_reason = ""
        self._payload: Any = _UNSET
        # Why a payload sealed end to end could not be opened (the handler then does not run).
        self.seal_error = ""

    def _open(self, encryptor: Any) -> None:
        """Open a payload its producer sealed end to end (``conveyor.sdk.encryption``)."""
        self.raw_payload, self.seal_error = open_payload(self.raw_payload, self.metadata, encryptor)

    @property
    def enqueued_at(self) -> datetime | None:
        """When the node accepted the task (its clock), or None from a server that does not send it."""
        if self._enqueued is _UNSET:
            self._enqueued = parse_time(self._enqueued_text)
        return self._enqueued

    @property
    def payload(self) -> Any:
        if self._payload is _UNSET:
            if "json" in self.content_type:
                raw = self.raw_payload
                if not raw:
                    self._payload = None
                elif 0 < raw[0] < 0x80 and (len(raw) == 1 or raw[1]):
                    self._payload = _json_text(raw.decode("utf-8", "surrogatepass"))
                else:
                    self._payload = json.loads(raw)  # another encoding, or a BOM
            else:
                self._payload = self.raw_payload
        return self._payload

    @property
    def cancelled(self) -> bool:
        """True once the server asked to cancel this task (or its deadline passed)."""
        return self._cancelled

    def progress(self, percent: float, message: str = "") -> None:
        """Report progress (0-100); safe to call from sync handlers' threads."""
        if self._worker is not None:
            self._worker._report_progress(self.id, percent, message)

    def _mark_cancelled(self, reason: str) -> None:
        self.cancel_reason = reason
        self._cancelled = True

    def __repr__(self) -> str:
        return f"<Task {self.type} {self.id} attempt {self.attempt}>"


class _Unset:
    pass


_UNSET = _Unset()


class Running:
    """Bookkeeping of one dispatched task (or batch) inside the worker."""

    __slots__ = ("batch_lease", "dropped", "future", "started", "tasks")

    def __init__(self, tasks: list[Task], batch_lease: str | None = None) -> None:
        self.tasks = tasks
        self.batch_lease = batch_lease
        self.future: asyncio.Future[Any] | None = None
        self.dropped = False  # the server no longer wants its result
        self.started = False  # its handler was called (else it waits in the prefetch window)
