"""The webhook gateway: a registration's endpoint, fed like a worker session.

One per active registration, on the node holding the registration's lock.
Each delivery is one signed JSON-RPC POST, sent off the dispatcher's path.
An answer ``completed`` or an error code settles the task; ``accepted``
parks it (slot held) until the endpoint reports through WebhookService or
the lease expires. Transport failures retry the task and feed the
endpoint's breaker, which withholds capacity from a dead endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
import json
import logging
import ssl
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from conveyor import metrics
from conveyor.conf import conveyor_settings
from conveyor.dispatch.frames import effective_deadline, iso
from conveyor.dispatch.gateway import Gateway, split_capacity
from conveyor.durations import format_duration
from conveyor.logs import log_fields
from conveyor.sdk import protocol as p
from conveyor.states import State
from conveyor.webhooks import tokens
from conveyor.webhooks.breaker import CLOSED, EndpointBreaker
from conveyor.webhooks.guard import TargetRefused, approve
from conveyor.webhooks.signing import signed_headers

if TYPE_CHECKING:
    from conveyor.dispatch.node import Node
    from conveyor.models import Task, WebhookRegistration

logger = logging.getLogger("conveyor.webhooks")

RETRYABLE, PERMANENT = -32000, -32001
MAX_ERROR = 1000
POOL_SHARD = 8  # deliveries in flight per connection pool
EXECUTE, CANCEL = "conveyor.task.execute", "conveyor.task.cancel"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every webhook client of the process.

    Each httpx client would otherwise load the CA bundle itself (~20 ms of
    the event loop per client, times the pools of every gateway started).
    """
    return httpx.create_ssl_context()


class TransportFailure(Exception):
    """Anything that is not a well-formed JSON-RPC answer on HTTP 200."""


@dataclass
class Delivery:
    """Webhook-side state of one in-flight task."""

    asynchronous: bool = False
    request: asyncio.Task[Any] | None = None


def request_body(task: Task, queue: str, member_id: str | None = None) -> dict[str, Any]:
    """The JSON-RPC request for one task (``id`` = lease id, or task id in a batch)."""
    params: dict[str, Any] = {
        "taskId": task.id,
        "queue": queue,
        "type": task.type,
        "attempt": task.retried + 1,
        "maxRetry": task.max_retry,
        "contentType": task.content_type,
        "payload": base64.b64encode(bytes(task.payload or b"")).decode(),
        "lease": {
            "token": tokens.mint(task.id, task.lease_id or ""),
            "heartbeatInterval": format_duration(conveyor_settings.LEASE_TTL / 3),
        },
    }
    deadline = effective_deadline(task)
    if deadline is not None:
        params["deadline"] = iso(deadline)
    if task.metadata:
        params["metadata"] = task.metadata
    return {"jsonrpc": "2.0", "id": member_id or task.lease_id, "method": EXECUTE, "params": params}


def read_answer(answer: Any, expected_id: str) -> tuple[str, str]:
    """Map one JSON-RPC response object to (outcome, error) or raise TransportFailure."""
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        raise TransportFailure("malformed JSON-RPC response")
    if answer.get("id") != expected_id:
        raise TransportFailure(f"response id {answer.get('id')!r} does not match {expected_id!r}")
    has_result, has_error = "result" in answer, "error" in answer
    if has_result == has_error:
        raise TransportFailure("a response needs exactly one of result and error")
    if has_result:
        status = (answer["result"] or {}).get("status") if isinstance(answer["result"], dict) else None
        if status == "completed":
            return p.SUCCESS, ""
        if status == "accepted":
            return "accepted", ""
        raise TransportFailure(f"result.status must be completed or accepted, got {status!r}")
    error = answer["error"]
    if not isinstance(error, dict) or not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
        raise TransportFailure("error must be an object with an integer code")
    message = str(error.get("message") or f"error {error['code']}")[:MAX_ERROR]
    if error["code"] == PERMANENT:
        return p.SKIP_RETRY, message
    return p.RETRY, message


class WebhookGateway(Gateway):
    def __init__(self, node: Node, registration: WebhookRegistration) -> None:
        super().__init__(
            node,
            f"webhook:{registration.name}",
            dict(registration.queues),
            registration.concurrency,
            list(registration.batch_types or []),
        )
        self.registration = registration
        self.name = registration.name
        self.secrets = list(registration.secrets or [])
        self.deliveries: dict[str, Delivery] = {}
        self.endpoint_breaker = EndpointBreaker()
        self.recent: deque[dict[str, Any]] = deque(maxlen=20)
        self.last_error = ""
        # Several small connection pools rather than one big one: httpcore
        # checks every idle connection of a pool on each request, so the cost
        # of a request grows with the pool; shards keep it flat.
        shards = max(1, -(-registration.concurrency // POOL_SHARD))
        self.clients = [
            httpx.AsyncClient(
                follow_redirects=False, timeout=conveyor_settings.WEBHOOK_REQUEST_TIMEOUT, verify=tls_context()
            )
            for _ in range(shards)
        ]
        self._next_client = itertools.count()
        self._upkeep: asyncio.Task[None] | None = None
        self._probe: asyncio.TimerHandle | None = None
        self.closed = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self.node.register_gateway(self)
        self._upkeep = self.node.spawn(self._keep_leases())

    async def drain(self) -> None:
        """Paused, deleted, moved or node stopping: stop and give every task back."""
        self.closed = True
        self.node.unregister_gateway(self)
        if self._probe is not None:
            self._probe.cancel()
        if self._upkeep is not None:
            self._upkeep.cancel()
        # Synchronous deliveries are aborted and their tasks released. Accepted
        # (asynchronous) ones keep their leases: the endpoint is still working
        # and its callbacks reach any node; if it goes silent, lease expiry
        # reclaims them.
        parked = {tid for tid, d in self.deliveries.items() if d.asynchronous}
        for delivery in self.deliveries.values():
            if delivery.request is not None:
                delivery.request.cancel()
        self.deliveries.clear()
        refs = self._take_all(keep=lambda task_id: task_id in parked)
        for task_id in parked:
            self.inflight.pop(task_id, None)
            self._forget(task_id)
        if refs:
            await self.node.db.run(self.node.broker.release_many, refs, by=self.runner)
        for client in self.clients:
            await client.aclose()

    async def shutdown(self, grace: float) -> None:
        """The node is stopping: synchronous deliveries have *grace* seconds to
        be answered, then every task still held goes back (``drain``)."""
        self.node.unregister_gateway(self)
        await self.wait_resolved(grace, busy=lambda: any(not d.asynchronous for d in self.deliveries.values()))
        await self.drain()

    # -- delivering ----------------------------------------------------------------------

    def push_tasks(self, queue: str, tasks: list[Task]) -> None:
        for task in tasks:
            delivery = self.deliveries[task.id] = Delivery()
            delivery.request = self.node.spawn(self._deliver_one(task, queue))

    def push_group(self, queue: str, group: str, tasks: list[Task]) -> None:
        lease_id = tasks[0].lease_id or ""
        for task in tasks:
            self.deliveries[task.id] = Delivery()
        request = self.node.spawn(self._deliver_batch(lease_id, queue, tasks))
        for task in tasks:
            self.deliveries[task.id].request = request

    def _timeout(self, task: Task) -> float:
        """min(task timeout, the registration's request timeout or else the default)."""
        limits = [self.registration.request_timeout or conveyor_settings.WEBHOOK_REQUEST_TIMEOUT]
        if task.timeout:
            limits.append(task.timeout)
        return min(limits)

    async def _post(self, body: bytes, timeout: float) -> Any:
        allow_http = self.node.dev or not conveyor_settings.API_TOKENS
        target = await approve(
            self.registration.url,
            allow_private=conveyor_settings.WEBHOOKS_ALLOW_PRIVATE_TARGETS,
            allow_http=allow_http,
        )
        headers = {**signed_headers(self.secrets, body), "Host": target.host_header}
        client = self.clients[next(self._next_client) % len(self.clients)]
        extensions = {"sni_hostname": target.sni_hostname} if target.sni_hostname else {}
        for index, url in enumerate(target.urls):
            try:
                response = await client.post(url, content=body, headers=headers, timeout=timeout, extensions=extensions)
                break
            except httpx.ConnectError:
                # Try the host's next approved address (e.g. ::1 refused, 127.0.0.1 listening).
                if index == len(target.urls) - 1:
                    raise
        if response.status_code != 200:
            raise TransportFailure(
                f"HTTP {response.status_code}" + (" (redirects are not followed)" if response.is_redirect else "")
            )
        try:
            return response.json()
        except ValueError:
            raise TransportFailure("response body is not JSON") from None

    async def _deliver_one(self, task: Task, queue: str) -> None:
        body = json.dumps(request_body(task, queue)).encode()
        task.payload = b""
        try:
            answer = await self._post(body, self._timeout(task))
            outcome, error = read_answer(answer, task.lease_id or "")
        except asyncio.CancelledError:
            self._finish(task.id, p.RETRY, "canceled: the delivery was aborted")
            raise
        except (TransportFailure, TargetRefused, httpx.HTTPError) as exc:
            self._transport_failed(task.id, describe_failure(exc))
            return
        except Exception as exc:  # never leave a delivery hanging in flight
            logger.exception(
                "webhook %s: delivery of %s failed", self.name, task.id, extra=log_fields(task_id=task.id, queue=queue)
            )
            self._transport_failed(task.id, describe_failure(exc))
            return
        self._answered(task.id, outcome, error)

    async def _deliver_batch(self, lease_id: str, queue: str, tasks: list[Task]) -> None:
        body = json.dumps([request_body(t, queue, member_id=t.id) for t in tasks]).encode()
        for t in tasks:
            t.payload = b""
        try:
            answers = await self._post(body, min(self._timeout(t) for t in tasks))
            if not isinstance(answers, list):
                raise TransportFailure("a batch must be answered with a JSON array")
            by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
        except asyncio.CancelledError:
            for t in tasks:
                self._finish(t.id, p.RETRY, "canceled: the delivery was aborted")
            raise
        except Exception as exc:  # transport failures and anything unexpected alike
            if not isinstance(exc, (TransportFailure, TargetRefused, httpx.HTTPError)):
                logger.exception("webhook %s: batch delivery failed", self.name)
            for t in tasks:
                self._transport_failed(t.id, describe_failure(exc))
            return
        if self.endpoint_breaker.success():
            self._restore_capacity()
        for t in tasks:
            try:
                outcome, error = read_answer(by_id.get(t.id), t.id)
            except TransportFailure as exc:
                outcome, error = p.RETRY, f"batch member: {exc}"
            self._answered(t.id, outcome, error, count_success=False)

    # -- outcomes ------------------------------------------------------------------------

    def _answered(self, task_id: str, outcome: str, error: str, count_success: bool = True) -> None:
        if count_success and self.endpoint_breaker.success():
            self._restore_capacity()
        if outcome == "accepted":
            delivery = self.deliveries.get(task_id)
            if delivery is not None:
                delivery.asynchronous, delivery.request = True, None
                self._note_resolved()  # a drain waits for synchronous deliveries only
            self._note(task_id, "accepted", "")
            record = self.inflight.get(task_id)
            if record is not None:
                # The endpoint works on if this node dies: a rescue of the
                # node must leave the task to it (conveyor/broker/nodes.py).
                lease_id = record.task.lease_id or ""
                self.node.spawn(self.node.db.run(self.node.broker.hand_over, task_id, lease_id, self.name))
            return
        self._finish(task_id, outcome, error)

    def _transport_failed(self, task_id: str, error: str) -> None:
        self.last_error = error
        if self.endpoint_breaker.failure(time.monotonic()):
            logger.warning("webhook %s: breaker open after transport failures (%s)", self.name, error)
            self._withhold_capacity()
        self._finish(task_id, p.RETRY, error, transport=True)

    def _finish(self, task_id: str, outcome: str, error: str, transport: bool = False) -> None:
        self.deliveries.pop(task_id, None)
        self._note(task_id, "transport_error" if transport else outcome, error)
        self.settle(task_id, outcome, error)

    def _note(self, task_id: str, outcome: str, error: str) -> None:
        metrics.WEBHOOK_DELIVERIES.labels(self.name, outcome).inc()
        self.recent.appendleft({"task_id": task_id, "outcome": outcome, "error": error, "at": iso(datetime.now(UTC))})

    def settled_elsewhere(self, task_id: str) -> None:
        """A callback (on any node) settled an accepted task: free its slot."""
        self.deliveries.pop(task_id, None)
        record = self.inflight.pop(task_id, None)
        if record is None:
            return
        self._forget(task_id)
        self._slot_freed(record)

    # -- cancel ----------------------------------------------------------------------------

    def push_cancel(self, task_id: str, lease_id: str, reason: str) -> None:
        delivery = self.deliveries.get(task_id)
        if delivery is None:
            return
        if not delivery.asynchronous and delivery.request is not None:
            delivery.request.cancel()  # aborts the open HTTP request
            return
        self.node.spawn(self._send_cancel(task_id))

    async def _send_cancel(self, task_id: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": CANCEL, "params": {"taskId": task_id}}).encode()
        try:
            await self._post(body, conveyor_settings.WEBHOOK_REQUEST_TIMEOUT)
        except TransportFailure:
            pass  # a notification has no answer body to check
        except (TargetRefused, httpx.HTTPError) as exc:
            logger.info(
                "webhook %s: cancel notification for %s failed: %s",
                self.name,
                task_id,
                exc,
                extra=log_fields(task_id=task_id),
            )

    # -- capacity and the breaker ------------------------------------------------------------

    def _withhold_capacity(self) -> None:
        self.detach()
        self._schedule_probe()

    def _schedule_probe(self) -> None:
        delay = max(0.0, self.endpoint_breaker.retry_at - time.monotonic())
        if self._probe is not None:
            self._probe.cancel()
        self._probe = self.node.loop.call_later(delay, self._start_probe)

    def _start_probe(self) -> None:
        if self.closed or not self.endpoint_breaker.probe_due(time.monotonic()):
            return
        self.endpoint_breaker.start_probe()
        top = max(self.queues, key=lambda q: self.queues[q])
        self.attach({top: 1})

    def _restore_capacity(self) -> None:
        logger.info("webhook %s: endpoint answered; breaker closed", self.name)
        if self._probe is not None:
            self._probe.cancel()
        self.detach()
        self.attach()

    @property
    def breaker_state(self) -> str:
        return self.endpoint_breaker.state

    # -- leases ------------------------------------------------------------------------------

    async def _keep_leases(self) -> None:
        """Extend open synchronous deliveries; free slots of async ones whose lease ended."""
        while not self.closed:
            await asyncio.sleep(conveyor_settings.LEASE_TTL / 3)
            sync = [tid for tid, d in self.deliveries.items() if not d.asynchronous and tid in self.inflight]
            try:
                if sync:
                    await self.heartbeat(sync)
                await self._reclaim_async()
            except Exception:
                logger.warning("webhook %s: lease upkeep failed", self.name, exc_info=True)

    async def _reclaim_async(self) -> None:
        parked = {
            tid: self.inflight[tid].task.lease_id
            for tid, d in self.deliveries.items()
            if d.asynchronous and tid in self.inflight
        }
        if not parked:
            return
        # An accepted task past its deadline is stopped here: the endpoint
        # may keep heartbeating, but the attempt is over.
        now = datetime.now(UTC)
        for task_id in list(parked):
            deadline = effective_deadline(self.inflight[task_id].task)
            if deadline is not None and deadline <= now:
                self.node.spawn(self._send_cancel(task_id))
                self._finish(task_id, p.RETRY, "deadline exceeded")
                del parked[task_id]

        def alive() -> set[str]:
            rows = self.node.broker.tasks.filter(id__in=list(parked), state__is=State.ACTIVE).values_list(
                "id", "lease_id"
            )
            return {tid for tid, lid in rows if parked.get(tid) == lid}

        live = await self.node.db.run(alive)
        for task_id in set(parked) - live:
            self.settled_elsewhere(task_id)

    def status(self) -> dict[str, Any]:
        return {
            "breaker": self.breaker_state,
            "last_error": self.last_error if self.breaker_state != CLOSED else "",
            "recent": list(self.recent),
            "inflight": len(self.inflight),
        }


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "transport: request timed out"
    if isinstance(exc, httpx.HTTPError):
        return f"transport: {type(exc).__name__}: {exc}"[:MAX_ERROR]
    if isinstance(exc, TargetRefused):
        return f"target refused: {exc}"[:MAX_ERROR]
    return f"transport: {exc}"[:MAX_ERROR]


__all__ = ["WebhookGateway", "read_answer", "request_body", "split_capacity"]
