"""An example Conveyor webhook endpoint: standard library only.

    WEBHOOK_SECRET=s3cret python examples/webhook_endpoint.py --port 9090

It verifies every delivery's signature (constant time, 5-minute window; a
comma-separated WEBHOOK_SECRET lists several secrets during rotation), then
runs the task. What the task does is read from its JSON payload, so the same
endpoint serves the tests:

    {}                      complete in the request (sync mode)
    {"sleep": 2}            work 2 s, then complete
    {"fail": true}          JSON-RPC error -32000: retry with backoff
    {"skip": true}          JSON-RPC error -32001: archive, no retry
    {"async": 3}            answer "accepted", heartbeat, report success after 3 s
    {"async": 3, "async_fail": true}   ... then report a retryable failure
    {"silent": true}        answer "accepted" and never call back
    {"status": 500}         answer HTTP 500 (a transport failure)
    {"redirect": true}      answer 302 (never followed)

Every delivery, cancel notification and callback is appended to --log as one
JSON line.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import os
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WINDOW = 300


def verify(secrets: list[str], timestamp: str, signature: str, body: bytes) -> bool:
    """True if *signature* is v1=HMAC-SHA256("{timestamp}.{body}") under any secret, fresh enough."""
    try:
        fresh = abs(time.time() - int(timestamp)) <= WINDOW
    except (TypeError, ValueError):
        return False
    ok = False
    presented = (signature or "").encode("utf-8", "replace")
    for secret in secrets:
        expected = "v1=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        ok |= hmac.compare_digest(expected.encode(), presented)
    return ok and fresh


class Endpoint:
    def __init__(self, secrets: list[str], conveyor_url: str, log_path: str | None, quiet: bool = False) -> None:
        self.secrets = secrets
        self.quiet = quiet
        self.conveyor_url = conveyor_url.rstrip("/")
        self.log_path = log_path
        self.lock = threading.Lock()
        self.cancelled: dict[str, threading.Event] = {}

    def log(self, event: str, **fields: Any) -> None:
        if not self.log_path:
            if not self.quiet:
                print(event, " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
            return
        line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
        with self.lock, open(self.log_path, "a") as f:
            f.write(line + "\n")

    def call(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.conveyor_url}/conveyor.v1.WebhookService/{method}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return {"code": exc.code, "message": exc.read().decode(errors="replace")}

    def execute(self, request: dict[str, Any], batch_size: int = 0) -> dict[str, Any] | None:
        params = request.get("params") or {}
        task_id = params.get("taskId", "")
        payload = base64.b64decode(params.get("payload") or "")
        spec = json.loads(payload) if payload and "json" in params.get("contentType", "") else {}
        spec = spec if isinstance(spec, dict) else {}
        self.log(
            "execute",
            task=task_id,
            attempt=params.get("attempt"),
            type=params.get("type"),
            batch=batch_size,
            id=request.get("id"),
            **({"payload": payload[:300].decode("utf-8", "replace")} if self.log_path else {}),
        )
        reply = {"jsonrpc": "2.0", "id": request.get("id")}
        if spec.get("async") or spec.get("silent"):
            if not spec.get("silent"):
                lease = params.get("lease") or {}
                threading.Thread(target=self.run_async, args=(task_id, lease, spec), daemon=True).start()
            return {**reply, "result": {"status": "accepted"}}
        if spec.get("sleep"):
            time.sleep(float(spec["sleep"]))
        if spec.get("fail"):
            return {**reply, "error": {"code": -32000, "message": "failed on purpose"}}
        if spec.get("skip"):
            return {**reply, "error": {"code": -32001, "message": "permanent failure"}}
        self.log("completed", task=task_id)
        return {**reply, "result": {"status": "completed"}}

    def run_async(self, task_id: str, lease: dict[str, Any], spec: dict[str, Any]) -> None:
        token = lease.get("token", "")
        interval = float(str(lease.get("heartbeatInterval", "10s")).rstrip("s") or 10)
        deadline = time.time() + float(spec["async"])
        cancelled = self.cancelled.setdefault(task_id, threading.Event())
        while time.time() < deadline:
            # Wake at the next heartbeat, or at once on a cancel notification.
            cancelled.wait(min(interval, max(0.0, deadline - time.time())))
            if cancelled.is_set():
                self.log(
                    "report",
                    task=task_id,
                    outcome="retry",
                    answer=self.call(
                        "ReportResult", {"leaseToken": token, "outcome": "TASK_OUTCOME_RETRY", "errorMsg": "canceled"}
                    ),
                )
                return
            if time.time() < deadline:
                self.log("heartbeat", task=task_id, answer=self.call("Heartbeat", {"leaseToken": token}))
        outcome = "TASK_OUTCOME_RETRY" if spec.get("async_fail") else "TASK_OUTCOME_SUCCESS"
        body: dict[str, Any] = {"leaseToken": token, "outcome": outcome}
        if spec.get("async_fail"):
            body["errorMsg"] = "async work failed"
        self.log("report", task=task_id, outcome=outcome, answer=self.call("ReportResult", body))


def make_handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive: the node reuses its connections instead of opening one
        # per delivery.
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes; without this, Nagle holds
            # the body until the client's delayed ACK (~40 ms per request).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if endpoint.secrets and not verify(
                endpoint.secrets,
                self.headers.get("X-Conveyor-Timestamp", ""),
                self.headers.get("X-Conveyor-Signature", ""),
                body,
            ):
                endpoint.log("rejected", reason="bad signature")
                self.answer(401, {"error": "bad signature"})
                return
            message = json.loads(body)
            if isinstance(message, list):
                replies = [endpoint.execute(m, batch_size=len(message)) for m in message]
                self.answer(200, replies)
                return
            if message.get("method") == "conveyor.task.cancel":
                task_id = (message.get("params") or {}).get("taskId", "")
                endpoint.cancelled.setdefault(task_id, threading.Event()).set()
                endpoint.log("cancel", task=task_id)
                self.answer(200, None)
                return
            spec = _spec_of(message)
            if spec.get("status"):
                self.answer(int(spec["status"]), {"error": "as asked"})
                return
            if spec.get("redirect"):
                self.send_response(302)
                self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.answer(200, endpoint.execute(message))

        def answer(self, status: int, data: Any) -> None:
            body = b"" if data is None else json.dumps(data).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                endpoint.log("aborted")

    return Handler


def _spec_of(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params") or {}
    try:
        spec = json.loads(base64.b64decode(params.get("payload") or "") or b"{}")
    except ValueError:
        return {}
    return spec if isinstance(spec, dict) else {}


class Server(ThreadingHTTPServer):
    # The standard library listens with a backlog of 5: a node opening 50
    # connections at once would see most of them refused or reset.
    request_queue_size = 256
    daemon_threads = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9090)
    parser.add_argument(
        "--conveyor", default=os.environ.get("CONVEYOR_URL", "http://127.0.0.1:8080"), help="where to call back"
    )
    parser.add_argument("--log", help="append one JSON line per event here (else a short line goes to stdout)")
    parser.add_argument("--quiet", action="store_true", help="print nothing per event")
    args = parser.parse_args()
    secrets = [s for s in os.environ.get("WEBHOOK_SECRET", "").split(",") if s]
    endpoint = Endpoint(secrets, args.conveyor, args.log, args.quiet)
    server = Server((args.host, args.port), make_handler(endpoint))
    print(
        f"webhook endpoint listening on http://{args.host}:{server.server_address[1]}/ ({'signed' if secrets else 'unsigned'})",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
