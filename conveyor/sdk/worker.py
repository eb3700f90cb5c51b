"""Workers: hold one WebSocket to a node and run the tasks it pushes.

``AsyncWorker`` runs on an asyncio loop; ``Worker`` wraps it for plain
synchronous programs. Sync handlers run in a thread pool sized to the
concurrency; async handlers run on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import random
import signal
import threading
import traceback
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from conveyor import __version__
from conveyor.sdk import protocol as p
from conveyor.sdk.encryption import Encryptor
from conveyor.sdk.errors import Fail, Release, SkipRetry, WorkerRefused
from conveyor.sdk.task import Running, Task

logger = logging.getLogger("conveyor.worker")

Handler = Callable[[Task], Any]
BatchHandler = Callable[[list[Task]], Any]

RECONNECT_BASE = 0.2
RECONNECT_CAP = 15.0
# Dispatches held beyond the concurrency, so that the next task is already
# here when a handler returns (docs/performance.md, "The prefetch window":
# 16 drained 2.1x faster than none at 2 slots, and no slower at 50).
DEFAULT_PREFETCH = 16


def ws_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + p.WORKER_PATH
    if base.startswith("http://"):
        return "ws://" + base[len("http://") :] + p.WORKER_PATH
    return base + p.WORKER_PATH


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ErrorText(str):
    """A failure's error as a result frame sends it (``error``), with the
    handler's traceback beside it (``traceback``, docs/protocol.md §6.1)."""

    traceback: str = ""


def with_traceback(error: str, exc: BaseException) -> str:
    """*error*, carrying the traceback of *exc* when it was raised (one only
    returned from a batch handler has none)."""
    if exc.__traceback__ is None:
        return error
    text = ErrorText(error)
    # What traceback.format_exc() gives in the except block that caught it.
    text.traceback = "".join(traceback.format_exception(exc))
    return text


def failure_outcome(exc: BaseException) -> tuple[str, str]:
    """The outcome a handler's exception reports, and the error stored with it
    (with its traceback, sent beside the error)."""
    if isinstance(exc, Release):
        return p.RELEASED, ""
    if isinstance(exc, Fail):
        return (p.SKIP_RETRY if exc.skip_retry else p.RETRY), with_traceback(exc.error, exc)
    return (p.SKIP_RETRY if isinstance(exc, SkipRetry) else p.RETRY), with_traceback(describe(exc), exc)


def _add_traceback(frame: dict[str, Any], error: str) -> None:
    trace = getattr(error, "traceback", "")
    if trace:
        frame["traceback"] = trace


# Values json.dumps always takes (a float, NaN included: it writes NaN).
_PLAIN = frozenset((type(None), str, int, float, bool))


def result_value(value: Any) -> Any:
    """Results are stored as JSON; anything else is stored as its text."""
    if type(value) in _PLAIN:
        return value  # (most handlers return None: no encoding to try)
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


class AsyncWorker:
    def __init__(
        self,
        base_url: str,
        *,
        queues: dict[str, int] | None = None,
        concurrency: int = 10,
        token: str | None = None,
        labels: dict[str, str] | None = None,
        drain_timeout: float = 30.0,
        encryptor: Encryptor | None = None,
        prefetch: int = DEFAULT_PREFETCH,
    ) -> None:
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 0 <= prefetch <= p.MAX_PREFETCH:
            raise ValueError(f"prefetch must be an integer from 0 to {p.MAX_PREFETCH}, not {prefetch!r}")
        self.base_url = base_url
        self.queues = dict(queues or {"default": 1})
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.token = token
        self.labels = dict(labels or {})
        self.drain_timeout = drain_timeout
        # Opens payloads their producers sealed end to end (conveyor.sdk.encryption).
        self.encryptor = encryptor
        self.handlers: dict[str, Handler] = {}
        self.batch_handlers: dict[str, BatchHandler] = {}
        self.session_id: str | None = None
        self.connected = asyncio.Event()
        self._running: dict[str, Running] = {}  # by task id: started, or waiting in the window
        self._waiting: deque[Running] = deque()  # received, not started (oldest first)
        self._active = 0  # deliveries whose handler runs
        self._window = 0  # the prefetch window the server granted this session
        self._pump_pending = False  # waiting deliveries to start with the next write
        self._outbox: list[dict[str, Any]] = []
        self._ws: ClientConnection | None = None
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="conveyor-task")
        self._flush_pending = False
        self._writes: set[asyncio.Future[None]] = set()
        self._unhandled: set[str] = set()
        # Whether a handler is a coroutine function, by id, beside the handler
        # itself (an id is reused only once its object is gone; handlers need
        # not be hashable): inspect.iscoroutinefunction costs more than a run
        # of a no-op handler's own code.
        self._kinds: dict[int, tuple[Callable[[Any], Any], bool]] = {}
        self.completed = 0

    # -- registration ------------------------------------------------------------------

    def task(self, task_type: str) -> Callable[[Handler], Handler]:
        """Register a handler for *task_type* (sync or async function of one Task).

        ``"*"`` registers a fallback for types without their own handler.
        """

        def register(fn: Handler) -> Handler:
            self.handlers[task_type] = fn
            return fn

        return register

    def batch(self, task_type: str) -> Callable[[BatchHandler], BatchHandler]:
        """Register a handler that receives a fired group of *task_type* as one list.

        Return None (all succeed), raise (all retry; ``SkipRetry`` archives
        all), or return ``{task_id: exception_or_result}`` to decide per task.
        """

        def register(fn: BatchHandler) -> BatchHandler:
            self.batch_handlers[task_type] = fn
            return fn

        return register

    # -- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until ``stop()``; reconnect with full-jitter backoff when the server goes away."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        attempt = 0
        while not self._stopping.is_set():
            self._welcomed = False
            try:
                await self._connect_and_serve()
            except WorkerRefused:
                raise
            # InvalidHandshake: an HTTP error status, or a connection closed before
            # its upgrade was answered (a node that is shutting down does that).
            except (TimeoutError, OSError, ConnectionClosed, InvalidHandshake) as exc:
                logger.warning("connection to %s lost: %s", self.base_url, describe(exc))
            if self._welcomed:
                attempt = 0  # the backoff restarts after every session that got going
            if self._stopping.is_set():
                break
            delay = random.uniform(0, min(RECONNECT_CAP, RECONNECT_BASE * 2**attempt))
            attempt += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def stop(self) -> None:
        """Drain gracefully: finish running tasks (up to the drain timeout), then close."""
        if self._stopping is not None:
            self._stopping.set()

    def stop_threadsafe(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def _connect_and_serve(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        async with connect(
            ws_url(self.base_url), additional_headers=headers, compression=None, max_size=None, open_timeout=10
        ) as ws:
            self._ws = ws
            try:
                await self._handshake(ws)
                await self._serve(ws)
            finally:
                self._ws = None
                self.connected.clear()
                self._abandon_running()

    async def _handshake(self, ws: ClientConnection) -> None:
        hello = {
            "type": p.HELLO,
            "protocol": p.PROTOCOL_VERSION,
            "queues": self.queues,
            "concurrency": self.concurrency,
            **({"prefetch": self.prefetch} if self.prefetch else {}),
            "labels": self.labels,
            "sdk_version": __version__,
            "batch_types": sorted(self.batch_handlers),
        }
        try:
            await ws.send(p.encode_frames([hello]))
            first = await asyncio.wait_for(ws.recv(), 15)
        except ConnectionClosed as exc:
            raise self._refusal(exc) from None
        frames = p.decode_frames(first)  # type: ignore[arg-type]
        welcome = frames[0]
        if welcome.get("type") != p.WELCOME:
            raise await self._refused_with(ws, welcome)
        self._welcomed = True
        self.session_id = welcome["session_id"]
        self.heartbeat_interval = float(welcome.get("heartbeat_interval") or 20)
        # A server without windows does not echo it (and would refuse `started`).
        self._window = int(welcome.get("prefetch") or 0)
        self.connected.set()
        logger.info("connected to %s as session %s", self.base_url, self.session_id)
        for frame in frames[1:]:
            self._on_frame(frame)

    async def _refused_with(self, ws: ClientConnection, frame: dict[str, Any]) -> Exception:
        """The server answered hello with an error frame; its close code says whether
        for good (``WorkerRefused``) or for now (1012: a node shutting down; tried again)."""
        message = str(frame.get("message") or frame)
        with contextlib.suppress(TimeoutError, ConnectionClosed):
            await asyncio.wait_for(ws.wait_closed(), 5)
        code = ws.close_code or p.CLOSE_PROTOCOL_ERROR
        if code in p.FATAL_CLOSE_CODES:
            return WorkerRefused(code, message)
        return ConnectionError(f"server closed the session ({code}): {message}")

    def _refusal(self, exc: ConnectionClosed) -> Exception:
        code = exc.rcvd.code if exc.rcvd else 1006
        if code in p.FATAL_CLOSE_CODES:
            return WorkerRefused(code, exc.rcvd.reason if exc.rcvd else "")
        return exc

    async def _serve(self, ws: ClientConnection) -> None:
        beats = asyncio.create_task(self._heartbeats())
        stop_wait = asyncio.create_task(self._stopping.wait())  # type: ignore[union-attr]
        reader = asyncio.create_task(self._read(ws))
        try:
            done, _ = await asyncio.wait({reader, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if reader in done:
                reader.result()  # the connection ended: raise why
                return
            # Stopping. websockets' recv() may be canceled without losing a message.
            reader.cancel()
            await asyncio.wait({reader})  # (a cancel of this task itself still raises)
            if not reader.cancelled():
                reader.exception()  # the connection ended meanwhile: the drain meets that end too
            await self._drain(ws)
        finally:
            beats.cancel()
            stop_wait.cancel()
            reader.cancel()

    async def _read(self, ws: ClientConnection) -> None:
        """Read and handle frames until the connection ends (one task for the session,
        not one per message: a frame reaches its handler a loop turn sooner)."""
        while True:
            try:
                message = await ws.recv()
            except ConnectionClosed as exc:
                refusal = self._refusal(exc)
                if isinstance(refusal, WorkerRefused):
                    raise refusal from None
                raise
            for frame in p.decode_frames(message):  # type: ignore[arg-type]
                self._on_frame(frame)

    def _on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == p.DISPATCH:
            self._start([Task(frame, frame["queue"], frame["lease_id"], self)], None, frame.get("started") is True)
        elif kind == p.BATCH_DISPATCH:
            tasks = [
                Task(
                    {**t, "task_type": t.get("task_type") or frame["task_type"]},
                    frame["queue"],
                    frame["lease_id"],
                    self,
                )
                for t in frame["tasks"]
            ]
            self._start(tasks, frame["lease_id"], frame.get("started") is True)
        elif kind == p.CANCEL:
            self._cancel(frame.get("task_id", ""), frame.get("reason") or "canceled", frame.get("lease_id"))
        elif kind == p.ERROR:
            logger.error("server error: %s: %s", frame.get("code"), frame.get("message"))

    # -- executing -----------------------------------------------------------------------

    def _start(self, tasks: list[Task], batch_lease: str | None, marked: bool = False) -> None:
        """Take a delivery: run it, or hold it in the window. *marked*: the
        server counted it started at delivery (docs/protocol.md §6.6)."""
        for task in tasks:
            if task.metadata:  # (no metadata: not sealed)
                task._open(self.encryptor)
        running = Running(tasks, batch_lease)
        for task in tasks:
            old = self._running.get(task.id)
            if old is not None:
                # Delivered again under a new lease: the old run's result is
                # no longer wanted (the server already dropped that lease).
                self._drop(old, "superseded by a new delivery")
            self._running[task.id] = running
        if self._stopping is not None and self._stopping.is_set():
            self._finish(running, [(t.id, p.RELEASED, "", None) for t in tasks])
            return
        if not self._window:
            self._launch(running)  # no window: the server sends only what may run
            return
        if marked:
            # Sent when the session's deliveries, this one included, fit in
            # our concurrency: a slot is free, with no `started` to write.
            # What waits here then fits too (it arrived in this turn, before
            # the pump): started first, oldest first.
            if self._waiting:
                self._flush()
            self._launch(running)
            return
        self._waiting.append(running)
        self._pump_soon()

    def _pump_soon(self) -> None:
        """Start waiting deliveries with the next write: every delivery that
        arrived and every handler that finished in this turn of the loop
        then share one message to the server (their results, one `started`)."""
        self._pump_pending = True
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _take_waiting(self) -> list[Running]:
        """Waiting deliveries that may start now (fewer than ``concurrency``
        run), announced by a `started` frame in the outbox: it is written
        before their handlers are called, so a crash names them, and only
        them (docs/protocol.md §6.6)."""
        self._pump_pending = False
        if self._stopping is not None and self._stopping.is_set():
            return []
        batch: list[Running] = []
        while self._waiting and self._active + len(batch) < self.concurrency:
            batch.append(self._waiting.popleft())
        if batch:
            self._outbox.append({"type": p.STARTED, "task_ids": [t.id for r in batch for t in r.tasks]})
        return batch

    def _launch(self, running: Running) -> None:
        # Started at once, not on the loop's next turn: a handler runs
        # until its first await while the frame that brought it is still
        # being read (an async handler that never waits finishes here).
        running.started = True
        self._active += 1
        running.future = eager(self._execute(running))

    async def _execute(self, running: Running) -> None:
        tasks = running.tasks
        try:
            try:
                if running.batch_lease is None:
                    outcome = await self._call_one(tasks[0])
                    outcomes = [(tasks[0].id, *outcome)]
                else:
                    outcomes = await self._call_batch(tasks)
            except asyncio.CancelledError:
                if running.dropped:
                    return
                reason = tasks[0].cancel_reason or "canceled"
                outcomes = [(t.id, p.RETRY, reason, None) for t in tasks]
            self._finish(running, outcomes)
        finally:
            self._active -= 1
            if self._waiting:
                self._pump_soon()  # its result and the next one's `started` leave together

    async def _call_one(self, task: Task) -> tuple[str, str, Any]:
        if task.seal_error:
            return p.RETRY, task.seal_error, None  # never ciphertext to a handler
        handler = self.handlers.get(task.type) or self.handlers.get("*")
        if handler is None and task.type in self.batch_handlers:
            # A group member delivered on its own (e.g. a retry): a batch of one.
            outcome = (await self._call_batch([task]))[0]
            return outcome[1], outcome[2], outcome[3]
        if handler is None:
            self._note_unhandled(task.type)
            return p.RELEASED, "", None
        # What _invoke does, inline: one coroutine fewer per task.
        timer = self._deadline_timer(task) if task.deadline is not None else None
        try:
            if self._is_async(handler):
                result = await handler(task)
            else:
                result = await asyncio.get_running_loop().run_in_executor(self._pool, handler, task)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return (*failure_outcome(exc), None)
        finally:
            if timer is not None:
                timer.cancel()
        if task.cancelled:
            return p.RETRY, task.cancel_reason or "canceled", None
        return p.SUCCESS, "", result_value(result)

    async def _call_batch(self, tasks: list[Task]) -> list[tuple[str, str, str, Any]]:
        unopened = [(t.id, p.RETRY, t.seal_error, None) for t in tasks if t.seal_error]
        if unopened:
            rest = [t for t in tasks if not t.seal_error]
            return unopened + (await self._call_batch(rest) if rest else [])
        handler = self.batch_handlers.get(tasks[0].type)
        if handler is None:
            self._note_unhandled(tasks[0].type)
            return [(t.id, p.RELEASED, "", None) for t in tasks]
        try:
            result = await self._invoke(handler, tasks, tasks[0])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome, error = failure_outcome(exc)
            return [(t.id, outcome, error, None) for t in tasks]
        per_task = result if isinstance(result, dict) else {}
        outcomes = []
        for t in tasks:
            value = per_task.get(t.id)
            if isinstance(value, BaseException):
                outcomes.append((t.id, *failure_outcome(value), None))
            else:
                outcomes.append((t.id, p.SUCCESS, "", result_value(value)))
        return outcomes

    def _note_unhandled(self, task_type: str) -> None:
        # Given back for a worker that has the handler; said once per type,
        # since the same tasks may keep coming back while no such worker runs.
        if task_type not in self._unhandled:
            self._unhandled.add(task_type)
            logger.warning("no handler for task type %r: its tasks are released for another worker", task_type)

    def _is_async(self, handler: Callable[[Any], Any]) -> bool:
        kind = self._kinds.get(id(handler))
        if kind is None or kind[0] is not handler:
            kind = self._kinds[id(handler)] = (handler, inspect.iscoroutinefunction(handler))
        return kind[1]

    async def _invoke(self, handler: Callable[[Any], Any], arg: Any, first: Task) -> Any:
        timer = self._deadline_timer(first)
        try:
            if self._is_async(handler):
                return await handler(arg)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, handler, arg)
        finally:
            if timer is not None:
                timer.cancel()

    def _deadline_timer(self, task: Task) -> asyncio.TimerHandle | None:
        if task.deadline is None:
            return None
        delay = (task.deadline - datetime.now(UTC)).total_seconds()
        return asyncio.get_running_loop().call_later(max(0.0, delay), self._cancel, task.id, "deadline exceeded")

    def _cancel(self, task_id: str, reason: str, lease_id: str | None = None) -> None:
        running = self._running.get(task_id)
        if running is None:
            return
        if lease_id and running.tasks[0].lease_id != lease_id:
            return  # a cancel for an earlier delivery of this task
        for task in running.tasks:
            task._mark_cancelled(reason)
        if not running.started:
            # Still in the window: answered at once, as a run stopped by it would be.
            self._finish(running, [(t.id, p.RETRY, reason, None) for t in running.tasks])
        elif running.future is not None and not running.future.done():
            running.future.cancel()

    def _drop(self, running: Running, reason: str) -> None:
        """Stop a run whose result the server no longer wants; report nothing."""
        running.dropped = True
        for task in running.tasks:
            task._mark_cancelled(reason)
        self._forget(running)
        if running.future is not None and not running.future.done():
            running.future.cancel()

    def _forget(self, running: Running) -> None:
        for task in running.tasks:
            if self._running.get(task.id) is running:
                del self._running[task.id]
        if not running.started:
            with contextlib.suppress(ValueError):
                self._waiting.remove(running)

    def _finish(self, running: Running, outcomes: list[tuple[str, str, str, Any]]) -> None:
        self._forget(running)
        if running.dropped:
            return
        self.completed += len(outcomes)
        for task_id, outcome, error, _result in outcomes:
            if outcome in (p.RETRY, p.SKIP_RETRY):
                # A failure is worth a line in the worker's own log too.
                verdict = "failed, will retry" if outcome == p.RETRY else "failed, no retry"
                logger.warning("task %s %s: %s", task_id, verdict, error, extra={"task_id": task_id})
        if running.batch_lease is None:
            task_id, outcome, error, result = outcomes[0]
            frame: dict[str, Any] = {
                "type": p.RESULT,
                "task_id": task_id,
                "lease_id": running.tasks[0].lease_id,
                "outcome": outcome,
            }
            if error:
                frame["error"] = error
                _add_traceback(frame, error)
            if result is not None:
                frame["result"] = result
        else:
            items = []
            for task_id, outcome, error, result in outcomes:
                item: dict[str, Any] = {"task_id": task_id, "outcome": outcome}
                if error:
                    item["error"] = error
                    _add_traceback(item, error)
                if result is not None:
                    item["result"] = result
                items.append(item)
            frame = {"type": p.BATCH_RESULT, "lease_id": running.batch_lease, "results": items}
        self._send(frame)

    # -- outgoing frames ---------------------------------------------------------------

    def _send(self, frame: dict[str, Any]) -> None:
        self._outbox.append(frame)
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        starting = self._take_waiting() if self._pump_pending else []
        frames, self._outbox = self._outbox, []
        ws = self._ws
        if frames and ws is not None:
            # Written now (to the socket, unless a write is still in progress):
            # a `started` frame must be out before its handler may crash us.
            task = eager(self._write(ws, p.encode_frames(frames)))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        for running in starting:
            self._launch(running)

    async def _write(self, ws: ClientConnection, text: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await ws.send(text)

    def _report_progress(self, task_id: str, percent: float, message: str) -> None:
        frame = {"type": p.PROGRESS, "task_id": task_id, "percent": percent, "message": message}
        loop = self._loop
        if loop is None:
            return
        try:
            running_loop = asyncio.get_running_loop()
        except RuntimeError:
            running_loop = None
        if running_loop is loop:
            self._send(frame)
        else:
            loop.call_soon_threadsafe(self._send, frame)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if self._running:
                self._send({"type": p.HEARTBEAT, "task_ids": list(self._running)})

    # -- endings -----------------------------------------------------------------------

    async def _drain(self, ws: ClientConnection) -> None:
        """Graceful stop: let running tasks finish (still hearing cancels), then close normally.

        New dispatches arriving meanwhile are released at once. Tasks still
        running at the drain timeout are released too, and told to stop.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_timeout
        # Those waiting in the prefetch window go back at once, for another worker.
        for running in list(self._waiting):
            self._finish(running, [(t.id, p.RELEASED, "", None) for t in running.tasks])
        logger.info("stopping: draining %d running tasks (up to %.0fs)", len(self._running), self.drain_timeout)
        recv: asyncio.Future[Any] | None = None
        try:
            while self._running and loop.time() < deadline:
                futures = {r.future for r in self._running.values() if r.future is not None}
                recv = recv or asyncio.ensure_future(ws.recv())
                await asyncio.wait(
                    {*futures, recv}, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED
                )
                if recv.done():
                    try:
                        message = recv.result()
                    except ConnectionClosed:
                        return
                    recv = None
                    for frame in p.decode_frames(message):  # type: ignore[arg-type]
                        self._on_frame(frame)
        finally:
            if recv is not None:
                recv.cancel()
        for running in {id(r): r for r in self._running.values()}.values():
            self._finish(running, [(t.id, p.RELEASED, "", None) for t in running.tasks])
            running.dropped = True
            for task in running.tasks:
                task._mark_cancelled("worker stopping")
            if running.future is not None and not running.future.done():
                running.future.cancel()
        self._flush()
        await asyncio.sleep(0)  # let the last write start
        await ws.close(p.CLOSE_NORMAL)

    def _abandon_running(self) -> None:
        """The connection is gone: the server re-queues these; stop them here."""
        for running in list(self._running.values()):
            running.dropped = True
            for task in running.tasks:
                task._mark_cancelled("connection lost")
            if running.future is not None and not running.future.done():
                running.future.cancel()
        self._running.clear()
        self._waiting.clear()
        self._outbox.clear()


def eager(coro: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
    """A task for *coro* that runs until its first await right now (through
    the loop's task factory when one is installed, e.g. by a tracing
    library: it may need to see every task)."""
    loop = asyncio.get_running_loop()
    if loop.get_task_factory() is None:
        return asyncio.Task(coro, loop=loop, eager_start=True)
    return loop.create_task(coro)


class Worker:
    """A synchronous facade: ``run()`` blocks until SIGINT/SIGTERM or ``stop()``."""

    def __init__(self, base_url: str, **options: Any) -> None:
        self._async = AsyncWorker(base_url, **options)
        self.task = self._async.task
        self.batch = self._async.batch

    @property
    def handlers(self) -> dict[str, Handler]:
        return self._async.handlers

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._async.stop_threadsafe)
        await self._async.run()

    def stop(self) -> None:
        """Ask a running worker (in another thread) to drain and return."""
        self._async.stop_threadsafe()
