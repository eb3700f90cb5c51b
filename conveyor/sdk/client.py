"""Producer clients: enqueue tasks and read them back over HTTP."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import urllib3

from conveyor.sdk.encryption import Encryptor, seal_request
from conveyor.sdk.errors import APIError, ConnectError, TransportError, api_error
from conveyor.sdk.protocol import compact_json

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
        # The same object as cls(id=..., ...), built without the frozen
        # dataclass's __init__: its object.__setattr__ per field was 2/3 of
        # this method's cost, paid once per enqueue (tests/sdk/test_client_cost.py).
        info = object.__new__(cls)
        info.__dict__.update(
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
        return info


@dataclass
class BatchItem:
    """One item of ``enqueue_batch``: the task, or the error that refused it.

    ``id`` and ``state`` are the stored task's (``None`` for a refused item);
    with ``enqueue_batch(..., minimal=True)`` they are all there is of it
    (``task`` is ``None``).
    """

    index: int
    task: TaskInfo | None
    error: APIError | None
    created: bool = False
    id: str | None = None
    state: str | None = None


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None  # reads a "Z" as UTC (Python 3.11+)


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
    # Only the options given (not None) go in the body, in this order, each
    # converted by its function (None: as it is).
    options = (
        ("id", id, None),
        ("priority", priority, None),
        ("max_retry", max_retry, None),
        ("process_in", process_in, _seconds),
        ("process_at", process_at, _stamp),
        ("expires_in", expires_in, _seconds),
        ("expires_at", expires_at, _stamp),
        ("unique_key", unique_key, None),
        ("unique_ttl", unique_ttl, _seconds),
        ("group", group, None),
        ("concurrency_key", concurrency_key, None),
        ("timeout", timeout, _seconds),
        ("deadline", deadline, _stamp),
        ("retention", retention, _seconds),
    )
    for name, value, convert in options:
        if value is not None:
            body[name] = value if convert is None else convert(value)
    if retry_policy:
        body["retry_policy"] = dict(retry_policy)
    if metadata:
        body["metadata"] = dict(metadata)
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
    return compact_json(body).encode()


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
        task_id, state = (task.id, task.state) if task is not None else (item.get("id"), item.get("state"))
        items.append(BatchItem(item["index"], task, error, bool(item.get("created")), task_id, state))
    return items


KEEP_IDLE = 20  # connections kept open between calls, per client
# What a URL path may hold as it is (RFC 3986 pchar and "/"); the rest is percent-encoded.
PATH_SAFE = "/%:@!$&'()*+,;=-._~"
# urllib3's errors raised before a request went out (NewConnectionError and
# NameResolutionError are ConnectTimeoutErrors; an SSLError is the handshake's).
NOT_SENT = (urllib3.exceptions.ConnectTimeoutError, urllib3.exceptions.SSLError, urllib3.exceptions.ProxyError)


def _proxy(scheme: str, host: str) -> str | None:
    """The proxy for *scheme* and *host* (``host:port``) that the environment
    (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) or the
    system's settings name, if any."""
    proxies = urllib.request.getproxies()
    found = proxies.get(scheme) or proxies.get("all")
    if not found or urllib.request.proxy_bypass(host):
        return None
    return found if "://" in found else "http://" + found


def _basic_auth(url: urllib.parse.SplitResult, header: str) -> dict[str, str]:
    """Basic credentials from *url*'s user info, as *header* (``basic_auth`` or ``proxy_basic_auth``)."""
    if url.username is None:
        return {}
    user, password = urllib.parse.unquote(url.username), urllib.parse.unquote(url.password or "")
    made = urllib3.make_headers(**{header: f"{user}:{password}"})
    return {name.title(): value for name, value in made.items()}  # Authorization replaces a token's


@functools.lru_cache(maxsize=256)
def _quoted(path: str) -> str:
    """*path* percent-encoded where it must be (the API's few paths are quoted once, not per call)."""
    return urllib.parse.quote(path, safe=PATH_SAFE + "?")


def _target(path: str, params: Mapping[str, Any] | None) -> str:
    path = _quoted(path)
    if params:
        path += ("&" if "?" in path else "?") + urllib.parse.urlencode(params, doseq=True)
    return path


class Connections:
    """Kept-alive HTTP/1.1 connections to one server (urllib3), shared by threads.

    Up to ``KEEP_IDLE`` idle connections are kept; one the server closed
    while it sat idle is noticed before a request is written on it (urllib3
    checks) and a new one is opened. Nothing is ever sent twice: urllib3's
    retries are off (``Retry(False)``), redirects are answers.
    """

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float | urllib3.Timeout | None) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        host = url.netloc.rpartition("@")[2]
        prefix = urllib.parse.quote(url.path.rstrip("/"), safe=PATH_SAFE)
        self._url = f"{url.scheme}://{host}{prefix}"  # named in errors: the base URL without its credentials
        self._headers = {**headers, "Accept": "application/json", **_basic_auth(url, "basic_auth")}
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._minimal_headers = {**self._json_headers, "Prefer": "return=minimal"}
        if not isinstance(timeout, urllib3.Timeout):
            timeout = urllib3.Timeout(connect=timeout, read=timeout)  # connect's also bounds each write
        options: dict[str, Any] = {"maxsize": KEEP_IDLE, "timeout": timeout, "retries": urllib3.Retry(False)}
        proxy = _proxy(url.scheme, host)
        self._pool: urllib3.HTTPConnectionPool | urllib3.ProxyManager
        if proxy is None:
            self._pool = urllib3.connection_from_url(base_url, **options)
            self._prefix = prefix
        else:  # a proxied request names the whole URL; the manager picks the tunnel or the proxy's pool
            proxy_auth = _basic_auth(urllib.parse.urlsplit(proxy), "proxy_basic_auth")
            self._pool = urllib3.proxy_from_url(proxy, proxy_headers=proxy_auth, **options)
            self._prefix = self._url
        self._closed = False

    def request(self, method: str, target: str, body: bytes | None = None, minimal: bool = False) -> tuple[int, bytes]:
        """Send one request (*target*: a path with its query, encoded; *minimal*:
        with ``Prefer: return=minimal``); return the status and the whole body."""
        if self._closed:
            raise RuntimeError("the client is closed")
        headers = self._headers if body is None else self._minimal_headers if minimal else self._json_headers
        try:
            response = self._pool.urlopen(method, self._prefix + target, body=body, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            kind = ConnectError if isinstance(exc, NOT_SENT) else TransportError
            raise kind(f"{method} {self._url}{target}: {exc}") from exc
        return response.status, response.data

    def close(self) -> None:
        self._closed = True
        if isinstance(self._pool, urllib3.ProxyManager):
            self._pool.clear()
        else:
            self._pool.close()


class Client:
    """Synchronous producer client; one may be shared by threads.

    Calls travel over kept-alive connections (``Connections``: urllib3).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float | urllib3.Timeout | None = 30.0,
        encryptor: Encryptor | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Seals every payload end to end before it is sent (conveyor.sdk.encryption).
        self.encryptor = encryptor
        self._connections = Connections(self.base_url, _headers(token), timeout)

    def enqueue(self, type: str, payload: Payload = None, **options: Any) -> TaskInfo:
        body = _sealed(task_request(type, payload, **options), self.encryptor)
        return TaskInfo.from_json(self.request("POST", "/api/v1/tasks", json=body))

    def enqueue_batch(self, tasks: Iterable[dict[str, Any]], *, minimal: bool = False) -> list[BatchItem]:
        """Each item is a ``task_request(...)`` dict; items succeed or fail alone.

        *minimal*: the server answers each stored task's id and state only
        (``Prefer: return=minimal``), a tenth of the bytes to read.
        """
        body = _json({"tasks": _sealed_all(tasks, self.encryptor)})
        return _batch_items(_check(*self._connections.request("POST", "/api/v1/tasks/batch", body, minimal)))

    def enqueue_tx(self, tasks: Iterable[dict[str, Any]]) -> list[TaskInfo]:
        """All or nothing."""
        body = self.request("POST", "/api/v1/tasks/tx", json={"tasks": _sealed_all(tasks, self.encryptor)})
        return [TaskInfo.from_json(t) for t in body["tasks"]]

    def get_task(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_json(self.request("GET", _task_path(task_id)))

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None) -> Any:
        """Call any API path (``/api/v1/...``): *json* is the body, *params* the query; return the answer's JSON."""
        body = None if json is None else _json(json)
        return _check(*self._connections.request(method, _target(path, params), body))

    def close(self) -> None:
        self._connections.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """Asynchronous producer client: ``Client``'s calls, each run in a thread
    (``asyncio.to_thread``) so that the event loop never waits on the network.

    One HTTP library for both clients; the cost is a thread hop per call
    (docs/sdk.md, §2.1).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float | urllib3.Timeout | None = 30.0,
        encryptor: Encryptor | None = None,
    ) -> None:
        self._client = Client(base_url, token, timeout=timeout, encryptor=encryptor)
        self.base_url = self._client.base_url
        self.encryptor = encryptor

    async def enqueue(self, type: str, payload: Payload = None, **options: Any) -> TaskInfo:
        return await asyncio.to_thread(self._client.enqueue, type, payload, **options)

    async def enqueue_batch(self, tasks: Iterable[dict[str, Any]], *, minimal: bool = False) -> list[BatchItem]:
        return await asyncio.to_thread(self._client.enqueue_batch, list(tasks), minimal=minimal)

    async def enqueue_tx(self, tasks: Iterable[dict[str, Any]]) -> list[TaskInfo]:
        return await asyncio.to_thread(self._client.enqueue_tx, list(tasks))

    async def get_task(self, task_id: str) -> TaskInfo:
        return await asyncio.to_thread(self._client.get_task, task_id)

    async def request(
        self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """``Client.request``, awaited."""
        return await asyncio.to_thread(self._client.request, method, path, json=json, params=params)

    async def aclose(self) -> None:
        self._client.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
