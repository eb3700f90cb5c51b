"""A Conveyor worker written from docs/protocol.md alone: no SDK, only `websockets`.

It proves the protocol document is enough to write a worker in any language.
Section numbers in the comments (§) point into docs/protocol.md.

    .venv/bin/python manage.py conveyord --dev --port 8080      # a dev node
    .venv/bin/python examples/raw_worker.py --url ws://127.0.0.1:8080 --max-tasks 1
    curl -s localhost:8080/api/v1/tasks -H 'content-type: application/json' \\
         -d '{"type":"hello","json":{"name":"x"}}'

Set CONVEYOR_TOKEN when the node has API tokens. Ctrl-C (or SIGTERM) drains:
running tasks finish (up to --drain seconds), then the session closes with 1000.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import signal
from datetime import UTC, datetime
from typing import Any

import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

FATAL_CLOSE_CODES = {4400, 4401, 4406}  # §13: the server refused us; do not reconnect


# -- task handlers: async functions of the decoded payload ------------------------------


async def hello(payload: Any) -> Any:
    await asyncio.sleep(0.05)  # pretend to work
    return {"greeting": f"hello {payload.get('name', 'world')}"}


async def hello_batch(payloads: list[Any]) -> list[Any]:
    return [f"hello {p.get('name', 'world')}" for p in payloads]


async def sleep(payload: Any) -> None:
    await asyncio.sleep(float(payload.get("seconds", 1)))  # for trying out drain, cancel and deadlines


HANDLERS = {"hello": hello, "sleep": sleep}
BATCH_HANDLERS = {"hello": hello_batch}  # declared in hello.batch_types (§4.1)


class Refused(Exception):
    """The server speaks a protocol version this worker does not (§4.2)."""


def decode_payload(body: dict[str, Any]) -> Any:
    raw = base64.b64decode(body.get("payload") or "")  # §3: payloads are base64
    return json.loads(raw or b"null") if "json" in (body.get("content_type") or "") else raw


def seconds_left(body: dict[str, Any]) -> float | None:
    """Time until the task's deadline (§10), or None when it has none."""
    if not body.get("deadline"):
        return None
    deadline = datetime.fromisoformat(body["deadline"].replace("Z", "+00:00"))
    return max(0.0, (deadline - datetime.now(UTC)).total_seconds())


class Session:
    """One WebSocket session (§4-§12)."""

    def __init__(self, ws: Any, args: argparse.Namespace, stop: asyncio.Event) -> None:
        self.ws, self.args, self.stop = ws, args, stop
        self.running: dict[str, asyncio.Task[None]] = {}  # task id (or batch lease id) -> its execution
        self.task_ids: dict[str, list[str]] = {}  # the same key -> the task ids it runs
        self.canceled: dict[str, str] = {}  # task id -> reason of a cancel frame
        self.welcomed = False
        self.done = 0

    async def send(self, *frames: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):  # a closed session shows up in read()
            await self.ws.send(json.dumps(frames[0] if len(frames) == 1 else list(frames)))  # §3

    async def handshake(self) -> float:
        await self.send(
            {
                "type": "hello",
                "protocol": 1,
                "queues": {self.args.queue: 1},
                "concurrency": self.args.concurrency,
                "labels": {"impl": "examples/raw_worker.py"},
                "batch_types": sorted(BATCH_HANDLERS),
                "min_server_version": "0.1.0",
            }
        )
        frames = parse(await self.ws.recv())
        welcome = frames[0]
        if welcome["type"] == "error":  # a refusal: the close (and its code) follows
            print(f"refused: {welcome['code']}: {welcome['message']}")
            await self.ws.recv()  # raises ConnectionClosed with the close code
        if welcome["type"] != "welcome" or welcome.get("protocol") != 1:
            raise Refused(f"unexpected first frame {welcome}")
        self.welcomed = True
        print(f"session {welcome['session_id']} on node {welcome['node']} (server {welcome['server_version']})")
        for frame in frames[1:]:
            await self.on_frame(frame)
        return float(welcome["heartbeat_interval"])

    async def serve(self) -> None:
        beats = asyncio.create_task(self.heartbeats(await self.handshake()))
        reader = asyncio.create_task(self.read())
        stopping = asyncio.create_task(self.stop.wait())
        try:
            await asyncio.wait({reader, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                reader.result()  # the connection ended: raise ConnectionClosed with its code
            await self.drain()  # reader still runs: cancels arrive, new dispatches go back
        finally:
            for task in (beats, reader, stopping, *self.running.values()):
                task.cancel()

    async def read(self) -> None:
        while True:
            for frame in parse(await self.ws.recv()):
                await self.on_frame(frame)

    async def on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "dispatch":  # §5.1
            if self.stop.is_set():  # draining: give it straight back, no retry spent
                await self.send(result(frame["task_id"], frame["lease_id"], "released"))
            else:
                self.start(frame["task_id"], [frame["task_id"]], self.execute(frame))
        elif kind == "batch_dispatch":  # §5.2
            self.start(frame["lease_id"], [t["task_id"] for t in frame["tasks"]], self.execute_batch(frame))
        elif kind == "cancel":  # §5.3, §11
            self.canceled[frame["task_id"]] = frame["reason"]
            task = self.running.get(frame["task_id"])
            if task is not None:
                task.cancel()
        elif kind == "error":  # §5.5
            print(f"server error: {frame['code']}: {frame['message']}")
        # "ping" (§5.4) and frame types this worker does not know are ignored (§3).

    def start(self, key: str, task_ids: list[str], work: Any) -> None:
        old = self.running.get(key)
        if old is not None:  # dispatched again while still running: the old lease is gone (§5.1)
            old.cancel()
        for task_id in task_ids:
            self.canceled.pop(task_id, None)
        task = asyncio.create_task(work)
        self.running[key], self.task_ids[key] = task, task_ids
        task.add_done_callback(lambda done: self.forget(key, done))

    def forget(self, key: str, task: asyncio.Task[None]) -> None:
        if self.running.get(key) is task:
            del self.running[key], self.task_ids[key]

    def superseded(self, key: str) -> bool:
        return self.running.get(key) is not asyncio.current_task()

    async def execute(self, frame: dict[str, Any]) -> None:
        task_id, lease_id = frame["task_id"], frame["lease_id"]
        handler = HANDLERS.get(frame["task_type"])
        try:
            if handler is None:
                raise LookupError(f"no handler for {frame['task_type']!r}")
            value = await asyncio.wait_for(handler(decode_payload(frame)), seconds_left(frame))
            answer = result(task_id, lease_id, "success", value=value)
        except asyncio.CancelledError:
            if self.superseded(task_id):
                raise  # a newer dispatch of this task took over: never answer this one
            reason = self.canceled.get(task_id)
            if reason is None and not self.stop.is_set():
                raise  # the session is gone: nobody takes an answer
            # An operator cancel is answered (§11); a drain timeout gives the task back.
            answer = result(task_id, lease_id, "retry", reason) if reason else result(task_id, lease_id, "released")
        except TimeoutError:
            answer = result(task_id, lease_id, "retry", "deadline exceeded")  # §10
        except Exception as exc:  # any other failure: retried with backoff (§8)
            answer = result(task_id, lease_id, "retry", f"{type(exc).__name__}: {exc}")
        if self.canceled.get(task_id) == "lease lost" or self.superseded(task_id):
            return  # §9.2: the server already dropped this lease; never answer it
        await self.send(answer)
        print(f"{frame['task_type']} {task_id} attempt {frame['attempt']}: {answer['outcome']}")
        self.finished(1)

    async def execute_batch(self, frame: dict[str, Any]) -> None:
        members = frame["tasks"]
        try:
            values = await BATCH_HANDLERS[frame["task_type"]]([decode_payload(m) for m in members])
            items = [
                {"task_id": m["task_id"], "outcome": "success", "result": v}
                for m, v in zip(members, values, strict=True)
            ]
        except Exception as exc:
            items = [{"task_id": m["task_id"], "outcome": "retry", "error": repr(exc)} for m in members]
        # Members left out of "results" count as released (§6.2).
        items = [i for i in items if self.canceled.get(i["task_id"]) != "lease lost"]
        await self.send({"type": "batch_result", "lease_id": frame["lease_id"], "results": items})
        print(f"batch {frame['lease_id']} of {len(members)} {frame['task_type']} tasks: answered {len(items)}")
        self.finished(len(items))

    def finished(self, n: int) -> None:
        self.done += n
        if self.args.max_tasks and self.done >= self.args.max_tasks:
            self.stop.set()

    async def heartbeats(self, interval: float) -> None:
        while True:  # §9.1: every heartbeat_interval, name every running task
            await asyncio.sleep(interval)
            ids = [
                t for key in self.running for t in self.task_ids.get(key, ()) if self.canceled.get(t) != "lease lost"
            ]
            if ids:
                await self.send({"type": "heartbeat", "task_ids": ids})

    async def drain(self) -> None:
        """§12.1: let running tasks finish (up to --drain s), release the rest, close with 1000."""
        if self.running:
            await asyncio.wait(list(self.running.values()), timeout=self.args.drain)
        leftovers = list(self.running.values())
        for task in leftovers:
            task.cancel()  # answered "released": no retry spent
        if leftovers:
            await asyncio.wait(leftovers)
        await self.ws.close(1000)


def parse(message: Any) -> list[dict[str, Any]]:
    data = json.loads(message)
    return data if isinstance(data, list) else [data]


def result(task_id: str, lease_id: str, outcome: str, error: str = "", value: Any = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "result", "task_id": task_id, "lease_id": lease_id, "outcome": outcome}
    if error:
        frame["error"] = error
    if value is not None:
        frame["result"] = value
    return frame


async def main(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    token = os.environ.get("CONVEYOR_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None  # §2
    attempt = 0
    while not stop.is_set():
        session = None
        try:
            url = args.url.rstrip("/") + "/ws/worker"
            # No size limit: one message can carry many dispatches of up to 1 MiB payload each (§2).
            async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
                session = Session(ws, args, stop)
                await session.serve()
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else 1006
            if code in FATAL_CLOSE_CODES:
                print(f"server refused the session (close {code}); not reconnecting")
                return 1
            print(f"connection closed ({code}); reconnecting")
        except (OSError, InvalidStatus, TimeoutError) as exc:
            print(f"cannot connect: {exc}")
        except Refused as exc:
            print(exc)
            return 1
        if stop.is_set():
            break
        if session is not None and session.welcomed:
            attempt = 0  # that session was accepted: the next outage starts its backoff afresh
        delay = random.uniform(0, min(15.0, 0.2 * 2**attempt))  # §13.2: full-jitter backoff
        attempt += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("CONVEYOR_WS_URL", "ws://127.0.0.1:8080"))
    parser.add_argument("--queue", default="default")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tasks", type=int, default=0, help="drain and exit after this many results")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds to let running tasks finish on stop")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
