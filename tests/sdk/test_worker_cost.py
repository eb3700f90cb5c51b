"""What the SDK worker does per task besides the handler (docs/sdk.md §3.3):
nothing that could be done once per worker or left undone until asked.

A scripted node in a child process (a real WebSocket server) hands the
worker a few dozen dispatches; the worker runs in this process under
``sys.setprofile``, which counts the Python functions it calls. The results
the node receives are checked too, so what is left out changes no answer.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

from conveyor.sdk import AsyncWorker, Task
from conveyor.sdk.task import Task as SdkTask

# The node: a welcome with the window asked for, every dispatch in one
# message (the first `concurrency` marked started, as the node does), then
# the results it got, as one JSON line on stdout.
NODE = textwrap.dedent(
    """
    import asyncio, json, sys
    from websockets.asyncio.server import serve

    dispatches = json.loads(sys.argv[1])
    results = []

    async def session(ws):
        hello = json.loads(await ws.recv())
        welcome = {"type": "welcome", "session_id": "S1", "heartbeat_interval": 60, "prefetch": hello["prefetch"]}
        await ws.send(json.dumps(welcome))
        for n, d in enumerate(dispatches):
            if n < hello["concurrency"]:
                d["started"] = True
        await ws.send(json.dumps(dispatches))
        async for message in ws:
            frames = json.loads(message)
            for f in frames if isinstance(frames, list) else [frames]:
                if f["type"] == "result":
                    results.append(f)
            if len(results) >= len(dispatches):
                print(json.dumps(results), flush=True)
                done.set_result(None)
                return

    async def main():
        global done
        done = asyncio.get_running_loop().create_future()
        async with serve(session, "127.0.0.1", 0) as server:
            print(server.sockets[0].getsockname()[1], flush=True)
            await done

    asyncio.run(main())
    """
)


def dispatch(n: int, task_type: str, payload: bytes = b'{"n": 1}') -> dict[str, Any]:
    return {
        "type": "dispatch",
        "task_id": f"T{n}",
        "lease_id": f"L{n}",
        "queue": "default",
        "task_type": task_type,
        "payload": base64.b64encode(payload).decode(),
        "content_type": "application/json",
        "attempt": 1,
        "max_retry": 3,
        "priority": 4,
        "metadata": {},
        "deadline": None,
        "enqueued_at": "2026-12-04T05:48:48.348828Z",
    }


def run_session(
    dispatches: list[dict[str, Any]], worker: AsyncWorker
) -> tuple[list[dict[str, Any]], collections.Counter]:
    """Serve *dispatches* to *worker*; the results the node got, and the
    Python functions this thread ran meanwhile: (file name, qualified name) -> calls."""
    node = subprocess.Popen(
        [sys.executable, "-c", NODE, json.dumps(dispatches)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        port = int(node.stdout.readline())  # type: ignore[union-attr]
        worker.base_url = f"http://127.0.0.1:{port}"
        calls: collections.Counter = collections.Counter()
        me = threading.get_ident()

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and threading.get_ident() == me:
                code = frame.f_code
                calls[(os.path.basename(code.co_filename), code.co_qualname)] += 1

        async def scenario() -> None:
            running = asyncio.create_task(worker.run())
            sys.setprofile(profile)
            try:
                async with asyncio.timeout(30):
                    while worker.completed < len(dispatches):
                        await asyncio.sleep(0.005)
            finally:
                sys.setprofile(None)
                await worker.stop()
                await asyncio.wait({running}, timeout=10)

        asyncio.run(scenario())
        results = json.loads(node.stdout.readline())  # type: ignore[union-attr]
        return results, calls
    finally:
        node.kill()
        node.wait()


def by_name(calls: collections.Counter, qualname: str, file: str | None = None) -> int:
    return sum(n for (f, q), n in calls.items() if q == qualname and (file is None or f == file))


def test_a_no_op_handler_costs_the_worker_no_per_task_encoder_decoder_event_or_handler_inspection() -> None:
    worker = AsyncWorker("http://unused", concurrency=4, prefetch=4, drain_timeout=1)
    seen: list[Any] = []

    @worker.task("noop")
    async def noop(task: Task) -> None:
        seen.append(task.payload)

    results, calls = run_session([dispatch(n, "noop") for n in range(40)], worker)

    assert sorted(r["task_id"] for r in results) == sorted(f"T{n}" for n in range(40))
    assert {(r["outcome"], r.get("result")) for r in results} == {("success", None)}
    assert seen == [{"n": 1}] * 40
    # Asked once for the one handler, not once per task.
    assert by_name(calls, "iscoroutinefunction") <= 1, calls
    # Frames and payloads decoded, results encoded, by decoders and encoders made once.
    assert by_name(calls, "JSONDecoder.__init__") == 0, calls
    assert by_name(calls, "JSONEncoder.__init__") == 0, calls
    assert by_name(calls, "detect_encoding") == 0, calls  # a UTF-8 payload's encoding is not guessed
    # A None result is not encoded to see whether it is JSON.
    assert by_name(calls, "dumps") == 0, calls
    # No threading.Event per task (its Condition and lock); no base64 wrapper; one coroutine fewer.
    assert by_name(calls, "Event.__init__", "threading.py") == 0, calls
    assert by_name(calls, "b64decode") == 0, calls
    assert by_name(calls, "AsyncWorker._invoke") == 0, calls
    assert by_name(calls, "Task.__init__", "task.py") == 40


def test_results_and_payloads_are_what_they_were_when_nothing_is_skipped() -> None:
    """The fast paths' answers: a value json.dumps refuses is stored as its
    text, a float as it is; sync and async handlers each inspected once;
    payloads in another encoding than UTF-8 are still decoded by their BOM."""
    worker = AsyncWorker("http://unused", concurrency=2, prefetch=2, drain_timeout=1)
    payloads: dict[str, Any] = {}

    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    @worker.task("obj")
    async def obj(task: Task) -> Any:
        return Opaque()

    @worker.task("plain")
    def plain(task: Task) -> Any:
        payloads[task.id] = task.payload
        return [1.5, "x", True]

    @worker.task("text")
    async def text(task: Task) -> Any:
        payloads[task.id] = task.payload
        return "done"

    dispatches = [dispatch(0, "obj"), dispatch(1, "obj"), dispatch(2, "plain"), dispatch(3, "plain")]
    dispatches += [dispatch(4, "text", "[1]".encode("utf-16")), dispatch(5, "text", b"\xef\xbb\xbf{}")]
    dispatches += [dispatch(6, "text", '"é"'.encode())]
    results, calls = run_session(dispatches, worker)

    outcome = {r["task_id"]: (r["outcome"], r.get("result")) for r in results}
    assert outcome == {
        "T0": ("success", "opaque"),
        "T1": ("success", "opaque"),
        "T2": ("success", [1.5, "x", True]),
        "T3": ("success", [1.5, "x", True]),
        "T4": ("success", "done"),
        "T5": ("success", "done"),
        "T6": ("success", "done"),
    }
    assert payloads == {"T2": {"n": 1}, "T3": {"n": 1}, "T4": [1], "T5": {}, "T6": "é"}
    assert by_name(calls, "iscoroutinefunction") <= 3, calls  # once per handler


def test_the_enqueue_time_is_parsed_when_read_and_a_cancel_is_seen_from_another_thread() -> None:
    frame = dispatch(0, "noop")
    task = SdkTask(frame, "default", "L0", None)
    assert task.cancelled is False
    assert task.enqueued_at is not None and task.enqueued_at.isoformat() == "2026-12-04T05:48:48.348828+00:00"
    assert SdkTask({**frame, "enqueued_at": None}, "default", "L0", None).enqueued_at is None

    seen = threading.Event()

    def poll() -> None:
        while not task.cancelled:
            pass
        seen.set()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    task._mark_cancelled("canceled")
    assert seen.wait(10) and task.cancel_reason == "canceled"
