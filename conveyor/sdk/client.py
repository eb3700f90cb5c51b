"""Producer clients: enqueue tasks and read them back over HTTP."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx

from conveyor.sdk.encryption import Encryptor, seal_request
from conveyor.sdk.errors import APIError, api_error
from conveyor.sdk.transport import Transport, serves

Payload = Any  # a JSON value, or bytes with a content type


@dataclass(frozen=True)
class TaskInfo:
    """A task as the server stored it."""

    id: str
    queue: str
    type: str
    state: str
    priority: int
    attempt: int
    retried: int
    max_retry: int
    last_error: str
    content_type: str
    payload: bytes
    metadata: dict[str, str]
    result: Any
    progress: int
    enqueued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def json(self) -> Any:
        """The payload decoded as JSON (None when it is not JSON)."""
        return self.raw.get("json")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskInfo:
        return cls(
            id=data["id"],
            queue=data["queue"],
            type=data["type"],
            state=data["state"],
            priority=data.get("priority", 4),
            attempt=data.get("attempt", 1),
            retried=data.get("retried", 0),
            max_retry=data.get("max_retry", 0),
            last_error=data.get("last_error") or "",
            content_type=data.get("content_type") or "",
            payload=base64.b64decode(data.get("payload") or ""),
            metadata=data.get("metadata") or {},
            result=data.get("result"),
            progress=data.get("progress", 0),
            enqueued_at=_time(data.get("enqueued_at")),
            started_at=_time(data.get("started_at")),
            finished_at=_time(data.get("finished_at")),
            raw=data,
        )


@dataclass
class BatchItem:
    """One item of ``enqueue_batch``: the task, or the error that refused it."""

    index: int
    task: TaskInfo | None
    error: APIError | None
    created: bool = False


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _seconds(value: float | timedelta | str | None) -> float | str | None:
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _stamp(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.astimezone()  # a naive time is the machine's local time
    return value.isoformat()


def task_request(
    type: str,
    payload: Payload = None,
    *,
    queue: str = "default",
    id: str | None = None,
    priority: int | None = None,
    max_retry: int | None = None,
    process_in: float | timedelta | None = None,
    process_at: datetime | None = None,
    expires_in: float | timedelta | None = None,
    expires_at: datetime | None = None,
    unique_key: str | None = None,
    unique_ttl: float | timedelta | None = None,
    unique: bool = False,
    group: str | None = None,
    concurrency_key: str | None = None,
    depends_on: Iterable[str | Mapping[str, str]] | None = None,
    timeout: float | timedelta | None = None,
    deadline: datetime | None = None,
    retention: float | timedelta | None = None,
    retry_policy: Mapping[str, Any] | None = None,
    metadata: Mapping[str, str] | None = None,
    content_type: str | None = None,
) -> dict[str, Any]:
    """The JSON body for one task. JSON values go as ``json``; bytes as base64."""
    body: dict[str, Any] = {"type": type, "queue": queue}
    if isinstance(payload, (bytes, bytearray, memoryview)):
        body["payload"] = base64.b64encode(bytes(payload)).decode()
        body["content_type"] = content_type or "application/octet-stream"
    else:
        body["json"] = payload
        if content_type:
            body["content_type"] = content_type
    options = {
        "id": id,
        "priority": priority,
        "max_retry": max_retry,
        "process_in": _seconds(process_in),
        "process_at": _stamp(process_at),
        "expires_in": _seconds(expires_in),
        "expires_at": _stamp(expires_at),
        "unique_key": unique_key,
        "unique_ttl": _seconds(unique_ttl),
        "group": group,
        "concurrency_key": concurrency_key,
        "timeout": _seconds(timeout),
        "deadline": _stamp(deadline),
        "retention": _seconds(retention),
        "retry_policy": dict(retry_policy) if retry_policy else None,
        "metadata": dict(metadata) if metadata else None,
    }
    body.update({k: v for k, v in options.items() if v is not None})
    if unique:
        body["unique"] = True
    if depends_on:
        body["depends_on"] = [d if isinstance(d, str) else dict(d) for d in depends_on]
    return body


def _sealed(body: dict[str, Any], encryptor: Encryptor | None) -> dict[str, Any]:
    return body if encryptor is None else seal_request(body, encryptor)


def _sealed_all(tasks: Iterable[dict[str, Any]], encryptor: Encryptor | None) -> list[dict[str, Any]]:
    return [_sealed(t, encryptor) for t in tasks]


def _headers(token: str | None) -> dict[str, str]:
    headers = {"User-Agent": "conveyor-python"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _check(status: int, content: bytes) -> Any:
    """The JSON of an answer, or the ``APIError`` it carries."""
    try:
        body = json.loads(content)
    except ValueError:
        body = {"error": "unknown", "message": content.decode("utf-8", "replace")[:500]}
    if status >= 400:
        raise api_error(status, body if isinstance(body, dict) else {"message": str(body)})
    return body


def _json(body: Any) -> bytes:
    """A request body as httpx's ``json=`` writes it."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _task_path(task_id: str) -> str:
    return "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="")


ERROR_STATUS = {
    "invalid_argument": 400,
    "not_found": 404,
    "already_exists": 409,
    "failed_precondition": 409,
    "lease_lost": 409,
}


def _batch_items(body: dict[str, Any]) -> list[BatchItem]:
    items = []
    for item in body["results"]:
        error = (
            api_error(ERROR_STATUS.get(item["error"].get("error"), 400), item["error"]) if item.get("error") else None
        )
        task = TaskInfo.from_json(item["task"]) if item.get("task") else None
        items.append(BatchItem(item["index"], task, error, bool(item.get("created"))))
    return items


class Client:
    """Synchronous producer client; one may be shared by threads.

    Calls travel over kept-alive ``http.client`` connections, or over httpx
    where only httpx will do (``conveyor.sdk.transport.serves``: a proxy,
    credentials in the URL, an ``httpx.Timeout``).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout = 30.0,
        encryptor: Encryptor | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Seals every payload end to end before it is sent (conveyor.sdk.encryption).
        self.encryptor = encryptor
        self._headers = _headers(token)
        self._timeout = timeout
        served = serves(self.base_url, timeout)
        self._transport = Transport(self.base_url, self._headers, timeout) if served else None  # type: ignore[arg-type]
        self._httpx: httpx.Client | None = None
        self._lock = threading.Lock()
        self._closed = False

    def enqueue(self, type: str, payload: Payload = None, **options: Any) -> TaskInfo:
        body = _sealed(task_request(type, payload, **options), self.encryptor)
        return TaskInfo.from_json(self._call("POST", "/api/v1/tasks", body))

    def enqueue_batch(self, tasks: Iterable[dict[str, Any]]) -> list[BatchItem]:
        """Each item is a ``task_request(...)`` dict; items succeed or fail alone."""
        return _batch_items(self._call("POST", "/api/v1/tasks/batch", {"tasks": _sealed_all(tasks, self.encryptor)}))

    def enqueue_tx(self, tasks: Iterable[dict[str, Any]]) -> list[TaskInfo]:
        """All or nothing."""
        body = self._call("POST", "/api/v1/tasks/tx", {"tasks": _sealed_all(tasks, self.encryptor)})
        return [TaskInfo.from_json(t) for t in body["tasks"]]

    def get_task(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_json(self._call("GET", _task_path(task_id)))

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call any API path (``/api/v1/...``) with httpx's keyword arguments and return its JSON."""
        response = self._http.request(method, path, **kwargs)
        return _check(response.status_code, response.content)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        if self._transport is None:
            response = self._http.request(method, path, json=body)
            return _check(response.status_code, response.content)
        return _check(*self._transport.request(method, path, None if body is None else _json(body)))

    @property
    def _http(self) -> httpx.Client:
        with self._lock:
            if self._closed:
                raise RuntimeError("the client is closed")
            if self._httpx is None:
                self._httpx = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self._timeout)
            return self._httpx

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self._transport is not None:
            self._transport.close()
        if self._httpx is not None:
            self._httpx.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """Asynchronous producer client."""

    def __init__(
        self, base_url: str, token: str | None = None, *, timeout: float = 30.0, encryptor: Encryptor | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.encryptor = encryptor
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=_headers(token), timeout=timeout)

    async def enqueue(self, type: str, payload: Payload = None, **options: Any) -> TaskInfo:
        body = _sealed(task_request(type, payload, **options), self.encryptor)
        return TaskInfo.from_json(await self.request("POST", "/api/v1/tasks", json=body))

    async def enqueue_batch(self, tasks: Iterable[dict[str, Any]]) -> list[BatchItem]:
        body = {"tasks": _sealed_all(tasks, self.encryptor)}
        return _batch_items(await self.request("POST", "/api/v1/tasks/batch", json=body))

    async def enqueue_tx(self, tasks: Iterable[dict[str, Any]]) -> list[TaskInfo]:
        body = await self.request("POST", "/api/v1/tasks/tx", json={"tasks": _sealed_all(tasks, self.encryptor)})
        return [TaskInfo.from_json(t) for t in body["tasks"]]

    async def get_task(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_json(await self.request("GET", _task_path(task_id)))

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call any API path (``/api/v1/...``) with httpx's keyword arguments and return its JSON."""
        response = await self._http.request(method, path, **kwargs)
        return _check(response.status_code, response.content)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
