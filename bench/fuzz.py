"""A fuzz pass of every HTTP and WebSocket input; prints a table of what broke.

    .venv/bin/python bench/fuzz.py [--short] [--surface NAME ...] [--keep]

Starts ``conveyord`` on PostgreSQL and Redis (a private database on
``BENCH_POSTGRES_URL``'s server, a private channel prefix on
``BENCH_REDIS_URL``), with an API token, and sends it hostile input:

* every REST operation of the node's OpenAPI schema (each route and
  method): each path parameter, query parameter and JSON body field (nested
  ones too: ``tasks[0].metadata.k``, ``options.priority``) replaced by each
  hostile value, every route with each hostile whole body, and the methods
  a route does not take;
* every Connect RPC (from the ``conveyor.v1`` descriptors): each field of
  its request message, hostile whole bodies in JSON and binary protobuf;
* every worker WebSocket frame of docs/protocol.md (``hello``, ``result``,
  ``batch_result``, ``heartbeat``, ``progress``, ``credit``, ``started``,
  and types the server does not take), each field, on a session that holds
  a dispatched task; hostile whole messages before and after the
  ``welcome``;
* ``/ws/events`` and ``/api/v1/events``: hostile filters and messages;
* the ``Authorization`` header on each kind of endpoint; the health,
  metrics, schema and static routes;
* the dashboard, signed in as a superuser: each page's query parameters
  (the task list's filter bar and search, its cursor), the ids in its paths
  (tasks, queues, cron entries, webhooks, with each of their actions) and
  each field of its forms (bulk and selected-task actions, reschedule,
  queue limits, new and edited cron entries and webhooks).

Hostile values: NUL, lone surrogates, 100,000-character strings, control
and bidi characters, ``1e400``, ``-2**70``, a 5,000-digit integer, NaN,
wrong types, 10,000-deep nesting; hostile bodies: 10 MB, invalid UTF-8,
empty, not JSON, UTF-16, a BOM.

A case fails when the server answers 5xx, when an HTTP error is not the
JSON error shape (REST: an object with ``error`` and ``message``, and
``field`` on a 400; Connect: ``code`` and ``message``), when a WebSocket
answers with anything but an error frame and a close code (or goes on
serving: a probe frame must then get its own ``invalid_frame``), when a
worker's accepted ``result`` is not applied or an accepted ``hello`` leaves
a session that is not listed, or when the node logs a traceback.

``--short`` is the form the test suite runs (tests/e2e/test_fuzz_pass.py):
each input gets one hostile value, taken in turn, about 800 requests. ``--keep`` keeps the
database and the node's log.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import os
import re
import signal
import struct
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import PG_ADMIN, REDIS_URL, ROOT

TOKEN = "fuzz-token-0123456789abcdefghijklmnopqrstuvwxyz"
SECRET_KEY = "fuzz-only-secret-key:0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
RAW = "\u0001raw\u0001"  # a placeholder json.dumps writes as "\\u0001raw\\u0001"
TEN_MB = 10 * 1024 * 1024
STAFF_USER, STAFF_PASSWORD = "fuzz-staff", "fuzz-staff-password-0123456789"

# -- hostile values -------------------------------------------------------------------------------

# (name, JSON text). Strings are written by json.dumps: NUL and lone surrogates as \u escapes.
STRINGS = [
    ("nul", "a\u0000b"),
    ("surrogate", "\ud800"),
    ("low-surrogate", "x\udfff"),
    ("empty", ""),
    ("long-100k", "x" * 100_000),
    ("controls", "\u0001\u0008\u001b\u007f"),
    ("bidi-emoji", "\u202e\U0001f600\ufeff"),
    ("crlf", "a\r\nb"),
    ("traversal", "../../etc/passwd"),
    ("percent", "%00%ff%2e"),
    ("sql", "'\"; DROP TABLE conveyor_task; --"),
    ("noncharacters", "\uffff\U0010ffff"),
    ("spaces", "   "),
]
NUMBERS = [
    ("1e400", "1e400"),
    ("-1e400", "-1e400"),
    ("-2**70", str(-(2**70))),
    ("2**64", str(2**64)),
    ("5000-digits", "9" * 5000),
    ("1e-400", "1e-400"),
    ("-1", "-1"),
    ("0", "0"),
    ("1.5", "1.5"),
    ("NaN", "NaN"),
    ("Infinity", "-Infinity"),
]
SHAPES = [
    ("null", "null"),
    ("true", "true"),
    ("array", "[]"),
    ("object", "{}"),
    ("array-of-null", "[null]"),
    ("nested", '{"a": {"b": [1, "\\u0000", {"c": "\\ud800"}]}}'),
    ("deep-10000", "[" * 10_000 + "]" * 10_000),
    ("wide-100k", "[" + ",".join(["1"] * 100_000) + "]"),
]


def hostile_values() -> list[tuple[str, str]]:
    strings = [(name, json.dumps(value)) for name, value in STRINGS]
    return strings + NUMBERS + SHAPES


def hostile_keys() -> list[tuple[str, str]]:
    """Object keys (JSON strings only)."""
    return [(f"key-{name}", json.dumps(value)) for name, value in STRINGS]


def hostile_bodies() -> list[tuple[str, bytes]]:
    """Whole request bodies."""
    return [
        ("10MB-string", b'{"type": "' + b"x" * TEN_MB + b'"}'),
        ("10MB-garbage", b"\xff" * TEN_MB),
        ("deep-10000-array", b"[" * 10_000 + b"]" * 10_000),
        ("deep-10000-object", b'{"a":' * 10_000 + b"1" + b"}" * 10_000),
        ("1e400", b"1e400"),
        ("-2**70", str(-(2**70)).encode()),
        ("null", b"null"),
        ("string", b'"tasks"'),
        ("array", b"[{}]"),
        ("invalid-utf8", b'{"type": "\xff\xfe\xed\xa0\x80", "queue": "q"}'),
        ("empty", b""),
        ("not-json", b"{not json"),
        ("nul-bytes", b"\x00" * 16),
        ("bom", b'\xef\xbb\xbf{"type": "t"}'),
        ("utf16", '{"type": "t"}'.encode("utf-16")),
        ("nan", b'{"priority": NaN}'),
        ("duplicate-keys", b'{"type": "a", "type": "b"}'),
    ]


def hostile_path_values() -> list[tuple[str, str]]:
    """URL-encoded path or query values (a lone surrogate as its WTF-8 bytes, not UTF-8)."""
    return [
        ("nul", "a%00b"),
        ("surrogate", "%ED%A0%80"),
        ("invalid-utf8", "%FF%FE"),
        ("long-10k", "x" * 10_000),
        ("empty", ""),
        ("dotdot", "%2e%2e"),
        ("controls", "%01%1b%7f"),
        ("emoji", quote("\u202e\U0001f600")),
        ("1e400", "1e400"),
        ("-2**70", str(-(2**70))),
        ("newline", "a%0d%0ab"),
        ("sql", quote("' OR 1=1 --", safe="")),
    ]


HOSTILE_AUTH: list[tuple[str, bytes]] = [
    ("missing", b""),
    ("bearer-only", b"Bearer"),
    ("bearer-two-spaces", b"Bearer  " + TOKEN.encode() + b"x"),
    ("wrong", b"Bearer wrong-token"),
    ("basic", b"Basic dXNlcjpwYXNz"),
    ("long-10k", b"Bearer " + b"x" * 10_000),
    ("latin1", b"Bearer \xff\xfe\xe9"),
    ("utf8", "Bearer \u00e9\U0001f600".encode()),
    ("two-words", b"Bearer tok tok"),
    ("token-scheme", b"Token " + TOKEN.encode()),
    ("tab", b"Bearer\t" + TOKEN.encode()),
    ("prefix", b"Bearer " + TOKEN[:-1].encode()),
    ("suffix", b"Bearer " + TOKEN.encode() + b"x"),
]


# -- the report -----------------------------------------------------------------------------------


@dataclass
class Surface:
    name: str
    tried: int = 0
    five_xx: int = 0
    bad_shape: int = 0
    ws_bad: int = 0
    tracebacks: int = 0
    statuses: Counter = field(default_factory=Counter)


@dataclass
class Report:
    surfaces: dict[str, Surface] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def surface(self, name: str) -> Surface:
        return self.surfaces.setdefault(name, Surface(name))

    def total(self, attr: str) -> int:
        return sum(getattr(s, attr) for s in self.surfaces.values())

    def table(self) -> str:
        head = f"{'surface':<16} {'inputs':>7} {'5xx':>5} {'bad shape':>9} {'ws bad':>6} {'tracebacks':>10}"
        rows = [head, "-" * len(head)]
        for s in self.surfaces.values():
            rows.append(f"{s.name:<16} {s.tried:>7} {s.five_xx:>5} {s.bad_shape:>9} {s.ws_bad:>6} {s.tracebacks:>10}")
        rows.append("-" * len(head))
        rows.append(
            f"{'total':<16} {self.total('tried'):>7} {self.total('five_xx'):>5} {self.total('bad_shape'):>9} "
            f"{self.total('ws_bad'):>6} {self.total('tracebacks'):>10}"
        )
        return "\n".join(rows)

    @property
    def clean(self) -> bool:
        return not self.failures


# -- JSON with raw pieces -------------------------------------------------------------------------


def dumps(body: Any, raw: str) -> bytes:
    """*body* as JSON, the placeholder RAW (a value or a key) replaced by the JSON text *raw*."""
    return json.dumps(body).replace(json.dumps(RAW), raw).encode("utf-8", "surrogatepass")


def paths_of(value: Any, prefix: str = "") -> Iterator[str]:
    """Every field path of a JSON value: ``a``, ``a.b``, ``tasks[0].queue``."""
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            yield from paths_of(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value[:1]):
            path = f"{prefix}[{i}]"
            yield path
            yield from paths_of(item, path)


def _steps(path: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]


def replaced(body: Any, path: str, value: Any) -> Any:
    out = copy.deepcopy(body)
    *head, last = _steps(path)
    target = out
    for step in head:
        target = target[step]
    target[last] = value
    return out


def dict_paths(body: Any) -> list[str]:
    """The paths of the objects in *body* whose keys are free (maps such as ``metadata``)."""
    return [p for p in paths_of(body) if isinstance(_at(body, p), dict) and _steps(p)[-1] in MAP_FIELDS]


MAP_FIELDS = {"metadata", "queues", "labels", "filter"}


def _at(body: Any, path: str) -> Any:
    for step in _steps(path):
        body = body[step]
    return body


def with_key(body: Any, path: str) -> Any:
    """*body* with the map at *path* holding one more entry, keyed RAW."""
    target = copy.deepcopy(_at(body, path))
    target[RAW] = next(iter(target.values()), "v") if target else "v"
    return replaced(body, path, target)


# -- answers --------------------------------------------------------------------------------------


def strict_json(text: bytes) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity (nor 1e400, which Python reads as inf)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    value = json.loads(text, parse_constant=refuse)
    if "Infinity" in json.dumps(value):
        raise ValueError("a number out of range")
    return value


def answer_problem(response: httpx.Response) -> str | None:
    """A 2xx JSON answer must be strict JSON (a client's parser refuses NaN and Infinity)."""
    if not response.headers.get("content-type", "").startswith("application/json") or not response.content:
        return None
    try:
        strict_json(response.content)
    except ValueError as exc:
        return f"a {response.status_code} answer that is not JSON ({exc}): {response.text[:120]!r}"
    return None


def rest_problem(response: httpx.Response) -> str | None:
    """Why a REST answer is not the JSON error shape (None: it is, or it is not an error)."""
    if response.status_code < 400:
        return answer_problem(response)
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith("application/json"):
        return f"{content_type or 'no content type'}: {response.text[:120]!r}"
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.text[:120]!r}"
    if not isinstance(body, dict) or not isinstance(body.get("error"), str) or not isinstance(body.get("message"), str):
        return f"no error and message: {response.text[:120]!r}"
    if response.status_code == 400 and "field" not in body:
        return f"a 400 without field: {response.text[:120]!r}"
    return None


def dashboard_problem(response: httpx.Response) -> str | None:
    """A dashboard page may answer an error with a page of its own, but never a traceback,
    nor a sign-in page (the session must hold), and its JSON (the cron preview) is strict."""
    if response.status_code in (301, 302) and "/admin/login/" in response.headers.get("location", ""):
        return f"signed out: {response.headers['location'][:80]}"
    if "Traceback" in response.text:
        return f"a traceback in a {response.status_code} page"
    return answer_problem(response)


def connect_problem(response: httpx.Response) -> str | None:
    if response.status_code < 400:
        return answer_problem(response)
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.headers.get('content-type')} {response.text[:120]!r}"
    if not isinstance(body, dict) or not isinstance(body.get("code"), str) or not isinstance(body.get("message"), str):
        return f"no code and message: {response.text[:120]!r}"
    return None


def stream_problem(content: bytes) -> str | None:
    """A Connect stream's end message, when it carries an error, must be ``{"error": {code, message}}``."""
    at = 0
    while at + 5 <= len(content):
        flags, size = content[at], struct.unpack(">I", content[at + 1 : at + 5])[0]
        message = content[at + 5 : at + 5 + size]
        at += 5 + size
        if flags & 0x02:
            try:
                end = json.loads(message or b"{}")
            except ValueError:
                return f"end-stream message not JSON: {message[:120]!r}"
            error = end.get("error")
            if error is not None and not (isinstance(error.get("code"), str) and "message" in error):
                return f"end-stream error without code/message: {message[:120]!r}"
    return None


def envelope(body: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(body)) + body


# -- the fuzzer -----------------------------------------------------------------------------------

SERVER_FRAMES = {"welcome", "dispatch", "batch_dispatch", "cancel", "ping", "error"}
WS_CLOSE_OK = {1000, 1007, 1008, 1009, 1012, 4400, 4401, 4403, 4406, 4408}
PROBE = {"type": "fuzz-probe"}


class Fuzzer:
    def __init__(self, url: str, output: Callable[[], str], *, token: str = TOKEN, short: bool = False,
                 staff: tuple[str, str] = (STAFF_USER, STAFF_PASSWORD)) -> None:  # fmt: skip
        self.url, self.output, self.token, self.short = url.rstrip("/"), output, token, short
        self.staff = staff  # a superuser's login, for the dashboard (create_staff makes it)
        self.ws_url = self.url.replace("http", "ws", 1)
        self.auth = {"Authorization": f"Bearer {token}"}
        self.http = httpx.Client(base_url=self.url, timeout=60, headers=self.auth)
        self.report = Report()
        self.values = hostile_values()
        self.keys = hostile_keys()
        self.bodies = hostile_bodies()
        self.path_values = hostile_path_values()
        self._turn = 0
        self._seen = len(self.output())
        self._n = 0

    # -- bookkeeping

    def some(self, values: list[Any]) -> list[Any]:
        """All of *values*; in the short form one, taking each in turn across calls."""
        if not self.short:
            return values
        self._turn += 1
        return [values[self._turn % len(values)]]

    def unique(self, stem: str) -> str:
        self._n += 1
        return f"{stem}-{self._n}"

    def record(self, surface: str, case: str, *, status: int | None = None, shape: str | None = None,
               ws: str | None = None) -> None:  # fmt: skip
        s = self.report.surface(surface)
        s.tried += 1
        if status is not None:
            s.statuses[status] += 1
        problems = []
        if status is not None and status >= 500:
            s.five_xx += 1
            problems.append(f"HTTP {status}")
        if shape is not None:
            s.bad_shape += 1
            problems.append(f"error shape: {shape}")
        if ws is not None:
            s.ws_bad += 1
            problems.append(f"websocket: {ws}")
        traceback = self._new_traceback()
        if traceback:
            s.tracebacks += 1
            problems.append(f"traceback: {traceback}")
        if problems:
            self.report.failures.append(f"[{surface}] {case}: {'; '.join(problems)}")

    def _new_traceback(self) -> str | None:
        text = self.output()
        new, self._seen = text[self._seen :], len(text)
        if "Traceback" not in new:
            return None
        lines = [line for line in new.splitlines() if line.strip()]
        start = next(i for i, line in enumerate(lines) if "Traceback" in line)
        tail = [line for line in lines[start:] if not line.startswith((" ", "\t"))]
        return " | ".join(tail[1:3])[:300] or "?"

    # -- fixtures: objects the path parameters name

    def fixtures(self) -> dict[str, str]:
        queue = self.unique("fuzzq")
        task = self.http.post("/api/v1/tasks", json={"type": "fuzz", "queue": queue, "process_in": "1h"}).json()
        cron_id = self.unique("fuzz-cron")
        self.http.post("/api/v1/cron", json={"id": cron_id, "spec": "@daily", "task_type": "fuzz", "queue": queue})
        hook = self.unique("fuzz-hook")
        self.http.post("/api/v1/webhooks", json={"name": hook, "url": "https://hooks.example/x",
                                                 "queues": {queue + "-hook": 1}, "secrets": ["s" * 32],
                                                 "paused": True})  # fmt: skip
        job = self.http.post("/api/v1/tasks/bulk", json={"action": "cancel", "filter": {"queue": queue + "-none"}})
        return {"queue": queue, "task_id": task["id"], "entry_id": cron_id, "hook": hook,
                "job_id": job.json().get("id", "x")}  # fmt: skip

    # -- REST

    def operations(self) -> list[tuple[str, str, dict[str, Any]]]:
        schema = self.http.get("/api/v1/schema", params={"format": "json"}).json()
        return [(path, method.upper(), op) for path, item in schema["paths"].items()
                for method, op in item.items() if method in ("get", "post", "put", "delete", "patch")]  # fmt: skip

    def rest(self) -> None:
        operations = self.operations()
        routes: dict[str, set[str]] = {}
        for path, method, op in operations:
            routes.setdefault(path, set()).add(method)
            self.rest_operation(path, method, op)
        for path, methods in routes.items():
            for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE"} - methods):
                fx = self.fixtures()
                response = self.http.request(method, self.fill_path(path, fx, {}), json={})
                self.record("rest", f"{method} {path} (not its method)", status=response.status_code,
                            shape=rest_problem(response))  # fmt: skip

    def fill_path(self, template: str, fx: dict[str, str], override: dict[str, str]) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in override:
                return override[name]
            return quote(self.path_base(template, name, fx), safe="")

        return re.sub(r"\{(\w+)\}", value, template)

    @staticmethod
    def path_base(template: str, name: str, fx: dict[str, str]) -> str:
        if name == "action":
            if template.startswith("/api/v1/tasks"):
                return "reschedule"
            return "pause"
        if name == "name":
            return fx["hook"] if "webhooks" in template else fx["queue"]
        return fx[name]

    def rest_operation(self, path: str, method: str, op: dict[str, Any]) -> None:
        case = f"{method} {path}"
        fx = self.fixtures()
        params = {p["name"]: p for p in op.get("parameters", [])}
        # Path parameters.
        for name in [p for p, spec in params.items() if spec["in"] == "path"]:
            for label, raw in self.some(self.path_values):
                url = self.fill_path(path, fx, {name: raw})
                body = rest_body(method, path, fx)
                response = self.send("rest", method, url, body)
                if response is not None:
                    self.record("rest", f"{case} {name}={label}", status=response.status_code,
                                shape=rest_problem(response))  # fmt: skip
        url = self.fill_path(path, fx, {})
        # Query parameters.
        base_query = rest_query(method, path, fx)
        for name in [p for p, spec in params.items() if spec["in"] == "query"]:
            for label, raw in self.some(self.path_values):
                query = "&".join(f"{k}={quote(v, safe='')}" for k, v in base_query.items() if k != name)
                response = self.send("rest", method, f"{url}?{query}&{name}={raw}", rest_body(method, path, fx))
                if response is not None:
                    self.record("rest", f"{case} ?{name}={label}", status=response.status_code,
                                shape=rest_problem(response))  # fmt: skip
        if method not in ("POST", "PUT", "PATCH"):
            return
        body = rest_body(method, path, fx) or {}
        fields = list(paths_of(body))
        # Schema fields the base body leaves out.
        fields += [f for f in self.body_fields(op) if f not in fields]
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in base_query.items())
        target = f"{url}?{query}" if query else url
        for name in fields:
            for label, raw in self.some(self.values):
                content = dumps(replaced(body, name, RAW), raw)
                response = self.send("rest", method, target, content)
                if response is not None:
                    self.record("rest", f"{case} {name}={label}", status=response.status_code,
                                shape=rest_problem(response))  # fmt: skip
        for name in dict_paths(body):
            for label, raw in self.some(self.keys):
                response = self.send("rest", method, target, dumps(with_key(body, name), raw))
                if response is not None:
                    self.record("rest", f"{case} {name}.<{label}>", status=response.status_code,
                                shape=rest_problem(response))  # fmt: skip
        for label, content in self.some(self.bodies):
            response = self.send("rest", method, target, content)
            if response is not None:
                self.record("rest", f"{case} body={label}", status=response.status_code, shape=rest_problem(response))

    def body_fields(self, op: dict[str, Any]) -> list[str]:
        content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        schema = content.get("schema", {})
        ref = schema.get("$ref")
        if ref is None:
            return []
        component = self._schema_cache().get(ref.rsplit("/", 1)[1], {})
        return list(component.get("properties", {}))

    def _schema_cache(self) -> dict[str, Any]:
        if not hasattr(self, "_components"):
            schema = self.http.get("/api/v1/schema", params={"format": "json"}).json()
            self._components = schema.get("components", {}).get("schemas", {})
        return self._components

    def send(self, surface: str, method: str, url: str, body: Any, headers: dict[str, Any] | None = None,
             ) -> httpx.Response | None:  # fmt: skip
        content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        base = {"Content-Type": "application/json"} if content is not None else {}
        try:
            return self.http.request(method, url, content=content, headers={**base, **(headers or {})})
        except httpx.HTTPError as exc:
            self.record(surface, f"{method} {url[:100]}", ws=None, status=599)
            self.report.failures.append(f"[{surface}] {method} {url[:100]}: no answer ({type(exc).__name__}: {exc})")
            return None

    # -- Connect

    def connect(self) -> None:
        from conveyor.v1 import service_pb2 as pb

        for service in ("TaskService", "AdminService", "WebhookService"):
            for method in pb.DESCRIPTOR.services_by_name[service].methods:
                self.connect_method(service, method)

    def connect_method(self, service: str, method: Any) -> None:
        fx = self.fixtures()
        path = f"/conveyor.v1.{service}/{method.name}"
        stream = method.server_streaming
        kind = "application/connect+" if stream else "application/"
        base = connect_base(method.input_type, fx)
        cases: list[tuple[str, bytes, str]] = []
        for name in paths_of(base):
            for label, raw in self.some(self.values):
                cases.append((f"{name}={label}", dumps(replaced(base, name, RAW), raw), "json"))
        for name in dict_paths(base):
            for label, raw in self.some(self.keys):
                cases.append((f"{name}.<{label}>", dumps(with_key(base, name), raw), "json"))
        for label, content in self.some(self.bodies):
            cases.append((f"body={label}", content, "json"))
        for label, content in self.some(proto_bodies()):
            cases.append((f"proto={label}", content, "proto"))
        for label, content, codec in cases:
            body = envelope(content) if stream and not label.startswith("body=") else content
            self.connect_case(path, f"{label}", body, f"{kind}{codec}", stream)

    def connect_case(self, path: str, label: str, body: bytes, content_type: str, stream: bool,
                     headers: dict[str, Any] | None = None, surface: str = "connect") -> None:  # fmt: skip
        request_headers = {"Content-Type": content_type, **({"Connect-Protocol-Version": "1"} if not stream else {}),
                           **(headers or {})}  # fmt: skip
        case = f"{path.rsplit('/', 1)[1]} {label}"
        try:
            if stream:
                status, problem = self._stream(path, body, request_headers)
            else:
                response = self.http.post(path, content=body, headers=request_headers)
                status, problem = response.status_code, connect_problem(response)
        except httpx.HTTPError as exc:
            self.record(surface, case, status=599)
            self.report.failures.append(f"[{surface}] {case}: no answer ({type(exc).__name__})")
            return
        self.record(surface, case, status=status, shape=problem)

    def _stream(self, path: str, body: bytes, headers: dict[str, Any]) -> tuple[int, str | None]:
        """A server stream's status and end message (read for a second: a taken watch stays open)."""
        content = b""
        timeout = httpx.Timeout(60, read=1.0)
        try:
            with self.http.stream("POST", path, content=body, headers=headers, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    return response.status_code, connect_problem(response)
                with contextlib.suppress(httpx.ReadTimeout):
                    for chunk in response.iter_bytes():
                        content += chunk
                return response.status_code, stream_problem(content)
        except httpx.ReadTimeout:
            return 200, None  # a watch that was taken: the runtime sends its headers with the first event

    # -- the worker WebSocket

    def ws(self, path: str = "/ws/worker", headers: dict[str, Any] | None = None) -> Any:
        return ws_connect(self.ws_url + path, additional_headers={**self.auth, **(headers or {})}, open_timeout=5,
                          max_size=None, close_timeout=5)  # fmt: skip

    def worker(self) -> None:
        for label, message in self.ws_messages():
            self.worker_case(f"first message {label}", None, message)
            self.worker_case(f"after welcome {label}", "welcome", message)
        hello = {"type": "hello", "queues": {"Q": 1}, "concurrency": 1, "labels": {"zone": "z"},
                 "batch_types": ["t"], "sdk_version": "0.1.0", "min_server_version": "0.0.1", "protocol": 1,
                 "prefetch": 0}  # fmt: skip
        self.frame_cases("hello", hello, None)
        frames = {
            "result": {"type": "result", "task_id": "T", "lease_id": "L", "outcome": "skip_retry", "error": "boom", "traceback": "Traceback: boom",
                       "result": {"r": 1}},
            "batch_result": {"type": "batch_result", "lease_id": "L",
                             "results": [{"task_id": "T", "outcome": "success", "result": 1, "error": "e"}]},
            "heartbeat": {"type": "heartbeat", "task_ids": ["T"]},
            "progress": {"type": "progress", "task_id": "T", "percent": 40, "message": "half"},
            "credit": {"type": "credit", "n": 1, "queue": "Q"},
            "started": {"type": "started", "task_ids": ["T"]},
            "extend": {"type": "extend", "task_id": "T", "lease_id": "L", "seconds": 30},
            "pong": {"type": "pong"},
        }  # fmt: skip
        for name, frame in frames.items():
            self.frame_cases(name, frame, "dispatch")

    def ws_messages(self) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = [(label, ("text", raw)) for label, raw in self.values]
        out += [(f"body={label}", ("bytes-as-text", content)) for label, content in self.bodies]
        if self.short:
            out = out[self._turn % 4 :: 4]
        out += [("binary", ("binary", b'{"type": "hello"}')), ("empty-array", ("text", "[]"))]
        return out

    def frame_cases(self, name: str, frame: dict[str, Any], stage: str | None) -> None:
        for path in paths_of(frame):
            for label, raw in self.some(self.values):
                self.worker_case(f"{name} {path}={label}", stage or "hello", (name, path, frame, raw))
        for path in dict_paths(frame):
            for label, raw in self.some(self.keys):
                self.worker_case(f"{name} {path}.<{label}>", stage or "hello", (name, path + "{}", frame, raw))

    def worker_case(self, case: str, stage: str | None, message: Any) -> None:
        """One session: get to *stage*, send *message*, then a probe; read to the close."""
        queue = self.unique("fuzzws")
        frames: list[dict[str, Any]] = []
        held: dict[str, Any] = {}
        problem = None
        try:
            with self.ws() as ws:
                if stage in ("welcome", "dispatch") or (stage == "hello" and not isinstance(message, tuple)):
                    ws.send(json.dumps({"type": "hello", "queues": {queue: 1}, "concurrency": 1}))
                    frames += self._until(ws, "welcome")
                if stage == "dispatch":
                    task = self.http.post("/api/v1/tasks", json={"type": "fuzz", "queue": queue, "max_retry": 3,
                                                                 "retention": "1h"}).json()  # fmt: skip
                    frames += self._until(ws, "dispatch")
                    held = {"task_id": task["id"], "lease_id": frames[-1]["lease_id"]}
                text = self._message(message, queue, held)
                kind, payload = text
                if kind == "binary":
                    ws.send(payload)
                elif kind == "bytes-as-text":
                    ws.send(payload, text=True)
                else:
                    ws.send(payload)
                accepted_hello = isinstance(message, tuple) and len(message) == 4 and message[0] == "hello"
                if accepted_hello:
                    got = self._read(ws, 5)
                    frames += got
                    welcome = next((f for f in got if f.get("type") == "welcome"), None)
                    if welcome is not None:
                        problem = self._listed(welcome["session_id"])
                with contextlib.suppress(ConnectionClosed):
                    ws.send(json.dumps(PROBE))
                frames += self._read(ws, 15)
                code = ws.close_code
        except (ConnectionClosed, OSError, TimeoutError, InvalidStatus) as exc:
            self.record("ws-worker", case, ws=f"{type(exc).__name__}: {exc}"[:200])
            return
        problem = problem or self.ws_verdict(frames, code)
        if problem is None and held and isinstance(message, tuple) and message[0] == "result":
            problem = self._applied(message, held, frames)
        self.record("ws-worker", case, ws=problem)

    def _message(self, message: Any, queue: str, held: dict[str, Any]) -> tuple[str, Any]:
        if not (isinstance(message, tuple) and len(message) == 4):
            return message  # (kind, payload)
        _, path, frame, raw = message
        frame = json.loads(json.dumps(frame).replace('"Q"', json.dumps(queue)).replace(
            '"T"', json.dumps(held.get("task_id", "T"))).replace('"L"', json.dumps(held.get("lease_id", "L"))))  # fmt: skip
        if path.endswith("{}"):
            body = with_key(frame, path[:-2])
        else:
            body = replaced(frame, path, RAW)
        return ("text", dumps(body, raw).decode("utf-8", "surrogatepass"))

    def _until(self, ws: Any, kind: str) -> list[dict[str, Any]]:
        """Frames up to the first of *kind*, which is put last."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            data = json.loads(ws.recv(timeout=20))
            frames += data if isinstance(data, list) else [data]
            found = [f for f in frames if f.get("type") == kind]
            if found:
                return [f for f in frames if f is not found[0]] + [found[0]]
        raise TimeoutError(f"no {kind}")

    def _read(self, ws: Any, timeout: float) -> list[dict[str, Any]]:
        """Frames until the close (or *timeout* without one: a session still open)."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                data = ws.recv(timeout=max(0.05, deadline - time.monotonic()))
                try:
                    parsed = json.loads(data)
                except ValueError:
                    frames.append({"type": f"<not JSON: {str(data)[:80]}>"})
                    continue
                frames += parsed if isinstance(parsed, list) else [parsed]
                if any(f.get("type") == "welcome" for f in frames) and timeout < 10:
                    return frames
        except (ConnectionClosed, TimeoutError):
            pass
        return frames

    @staticmethod
    def ws_verdict(frames: list[dict[str, Any]], code: int | None) -> str | None:
        strange = [f.get("type") for f in frames if f.get("type") not in SERVER_FRAMES]
        if strange:
            return f"frames that are not the protocol's: {strange[:3]}"
        if code is None:
            return "still open after the probe (no error frame, no close)"
        if code not in WS_CLOSE_OK:
            return f"close code {code}"
        if 4400 <= code < 4500 and not any(f.get("type") == "error" for f in frames):
            return f"close {code} without an error frame"
        return None

    def _listed(self, session_id: str) -> str | None:
        for _ in range(20):
            workers = self.http.get("/api/v1/workers").json()["workers"]
            if any(w["id"] == session_id for w in workers):
                return None
            time.sleep(0.1)
        return f"welcomed session {session_id} is not listed (a hidden worker)"

    def _applied(self, message: tuple, held: dict[str, Any], frames: list[dict[str, Any]]) -> str | None:
        """A result the server took (the error frame is the probe's) must settle the task."""
        path = message[1]
        # A result naming another lease is stale and dropped by design (docs/protocol.md §6.1).
        if path in ("task_id", "type", "lease_id") or not any("fuzz-probe" in f.get("message", "") for f in frames):
            return None
        for _ in range(30):
            state = self.http.get(f"/api/v1/tasks/{held['task_id']}").json().get("state")
            if state not in ("active", "pending"):
                return None
            time.sleep(0.1)
        return f"result accepted but not applied: the task is {state}"

    # -- /ws/events and /api/v1/events

    def events(self) -> None:
        for param in ("queue", "type", "kind"):
            for label, raw in self.some(self.path_values):
                self.events_case(f"?{param}={label}", f"/ws/events?{param}={raw}", None)
                response = self._sse(f"/api/v1/events?{param}={raw}")
                if response is not None:
                    self.record("sse-events", f"?{param}={label}", status=response[0], shape=response[1])
        for label, message in self.ws_messages():
            self.events_case(f"message {label}", "/ws/events", message)

    def events_case(self, case: str, path: str, message: Any) -> None:
        try:
            with self.ws(path) as ws:
                if message is not None:
                    kind, payload = message
                    with contextlib.suppress(ConnectionClosed):
                        ws.send(payload, text=True) if kind == "bytes-as-text" else ws.send(payload)
                frames = self._read(ws, 0.3)
                code = ws.close_code
        except InvalidStatus as exc:
            status = exc.response.status_code
            self.record("ws-events", case, status=status)
            return
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            self.record("ws-events", case, ws=f"{type(exc).__name__}: {exc}"[:200])
            return
        strange = [f for f in frames if "events" not in f and "error" not in f]
        problem = f"frames that are not events: {strange[:2]}" if strange else None
        if code is not None and code not in WS_CLOSE_OK:
            problem = f"close code {code}"
        self.record("ws-events", case, ws=problem)

    def _sse(self, path: str, headers: dict[str, Any] | None = None) -> tuple[int, str | None] | None:
        try:
            with self.http.stream("GET", path, headers=headers, timeout=httpx.Timeout(60, read=1.0)) as response:
                if response.status_code >= 400:
                    response.read()
                    return response.status_code, rest_problem(response)
                return response.status_code, None
        except httpx.HTTPError as exc:
            self.report.failures.append(f"[sse-events] {path[:100]}: no answer ({type(exc).__name__})")
            return 599, None

    # -- Authorization headers, and the routes outside the API

    def auth_headers(self) -> None:
        fx = self.fixtures()
        task = {"type": "fuzz", "queue": fx["queue"], "process_in": "1h"}
        targets = [
            ("GET", "/api/v1/tasks", None), ("POST", "/api/v1/tasks", task), ("POST", "/api/v1/tasks/tx",
            {"tasks": [task]}), ("GET", f"/api/v1/tasks/{fx['task_id']}", None), ("GET", "/metrics", None),
            ("POST", f"/api/v1/queues/{fx['queue']}/pause", {}),
        ]  # fmt: skip
        for label, value in HOSTILE_AUTH if not self.short else HOSTILE_AUTH[::4]:
            headers = {"Authorization": value} if value else {}
            for method, path, body in targets:
                response = self.bare(method, path, body, headers)
                problem = (
                    rest_problem(response) if not path.startswith("/metrics") or response.status_code >= 400 else None
                )
                if path == "/metrics" and response.status_code >= 400:
                    problem = rest_problem(response)
                self.record("auth", f"{label} {method} {path}", status=response.status_code, shape=problem)
                # /metrics is open unless METRICS_AUTH is set (docs/operations.md).
                if response.status_code < 400 and label != "tab" and path != "/metrics":
                    self.report.failures.append(f"[auth] {label} {method} {path}: accepted ({response.status_code})")
            for rpc, body in [("TaskService/GetTask", {"id": fx["task_id"]}), ("TaskService/Enqueue", {"type": "t"}),
                              ("AdminService/ListQueues", {})]:  # fmt: skip
                response = httpx.post(self.url + f"/conveyor.v1.{rpc}", content=json.dumps(body),
                                      headers={"Content-Type": "application/json", **headers}, timeout=30)  # fmt: skip
                self.record("auth", f"{label} {rpc}", status=response.status_code, shape=connect_problem(response))
                if response.status_code < 400 and label not in ("tab",):
                    self.report.failures.append(f"[auth] {label} {rpc}: accepted ({response.status_code})")
            sse = self._sse("/api/v1/events", headers=headers)
            if sse is not None:
                self.record("auth", f"{label} GET /api/v1/events", status=sse[0], shape=sse[1])
            for path in ("/ws/worker", "/ws/events"):
                self.auth_ws(label, path, value)

    def bare(self, method: str, path: str, body: Any, headers: dict[str, Any]) -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        base = {"Content-Type": "application/json"} if content is not None else {}
        with httpx.Client(base_url=self.url, timeout=30) as client:
            return client.request(method, path, content=content, headers={**base, **headers})

    def auth_ws(self, label: str, path: str, value: bytes) -> None:
        try:
            with ws_connect(self.ws_url + path, additional_headers={"Authorization": value.decode("latin1")},
                            open_timeout=10) as ws:  # fmt: skip
                with contextlib.suppress(ConnectionClosed):
                    ws.send(json.dumps({"type": "hello", "queues": {"fuzz-auth": 1}, "concurrency": 1}))
                frames = self._read(ws, 5)
                code = ws.close_code
        except InvalidStatus as exc:
            self.record("auth", f"{label} {path}", status=exc.response.status_code)
            return
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            self.record("auth", f"{label} {path}", ws=f"{type(exc).__name__}: {exc}"[:200])
            return
        problem = None
        if code != 4401 and label != "tab":
            problem = f"close {code}, frames {[f.get('type') or f.get('error') for f in frames][:3]} (expected 4401)"
        self.record("auth", f"{label} {path}", ws=problem)

    def other_routes(self) -> None:
        paths = ["/healthz", "/readyz", "/metrics", "/api/v1/schema", "/api/v1/docs", "/api/v1/{v}",
                 "/static/{v}", "/static/%2e%2e/{v}", "/conveyor.v1.{v}/X", "/conveyor.v1.TaskService/{v}"]  # fmt: skip
        for template in paths:
            for label, raw in self.some(self.path_values):
                path = template.replace("{v}", raw) if "{v}" in template else f"{template}?format={raw}&x={raw}"
                for method in ("GET", "POST"):
                    try:
                        response = self.http.request(method, path, headers={"Content-Type": "application/json"})
                    except httpx.HTTPError as exc:
                        self.record("other", f"{method} {template} {label}", status=599)
                        self.report.failures.append(f"[other] {method} {path[:80]}: {type(exc).__name__}")
                        continue
                    api = path.startswith("/api/v1/") and "/docs" not in path and "/schema" not in path
                    connect = path.startswith("/conveyor.v1.")
                    shape = rest_problem(response) if api else connect_problem(response) if connect and \
                        response.status_code not in (404, 405) else None  # fmt: skip
                    self.record("other", f"{method} {template} {label}", status=response.status_code, shape=shape)

    # -- the dashboard (a staff session): its pages' query parameters, ids in paths, its forms

    DASHBOARD_PAGES = {
        "/": ("next",),
        "/queues/": (),
        "/tasks/": ("queue", "state", "type", "q", "where", "contains", "limit", "after", "trail"),
        "/limits/": (),
        "/workers/": (),
        "/cron/": (),
        "/cron/new": (),
        "/cron/preview": ("spec", "timezone"),
        "/webhooks/": (),
        "/webhooks/new": (),
        "/events/": ("queue", "type", "kind"),
    }
    # (method, path with {v} for the hostile value; {task}, {queue}, ... for the fixtures)
    DASHBOARD_PATHS = [
        ("GET", "/tasks/{v}/"), ("POST", "/tasks/{v}/run"), ("POST", "/tasks/{v}/cancel"),
        ("POST", "/tasks/{v}/archive"), ("POST", "/tasks/{v}/delete"), ("POST", "/tasks/{v}/reschedule"),
        ("POST", "/tasks/{task}/{v}"), ("GET", "/queues/{v}/"), ("POST", "/queues/{v}/pause"),
        ("POST", "/queues/{queue}/{v}"), ("GET", "/cron/{v}/edit"), ("POST", "/cron/{v}/edit"),
        ("POST", "/cron/{v}/pause"), ("POST", "/cron/{v}/delete"), ("POST", "/cron/{cron}/{v}"),
        ("GET", "/webhooks/{v}/edit"), ("POST", "/webhooks/{v}/edit"), ("POST", "/webhooks/{v}/pause"),
        ("POST", "/webhooks/{v}/delete"), ("POST", "/webhooks/{hook}/{v}"),
    ]  # fmt: skip
    # (path, the form's valid fields): each field in turn gets each hostile value
    DASHBOARD_FORMS = [
        ("/tasks/actions", {"action": "run", "ids": "{task}", "next": "/tasks/"}),
        ("/tasks/bulk", {"action": "cancel", "queue": "{queue}-none", "state": "", "type": "", "q": "", "where": "",
                         "contains": ""}),
        ("/tasks/{task}/reschedule", {"process_in": "1h", "process_at": ""}),
        ("/queues/{queue}/policy", {"policy": "fifo"}),
        ("/queues/{queue}/rate-limit", {"rate": "5", "burst": "1", "op": "set"}),
        ("/queues/{queue}/concurrency-limit", {"limit": "2", "op": "set"}),
        ("/queues/{queue}/group-config", {"group": "", "max_size": "5", "max_delay": "1s", "grace": "1s", "op": "set"}),
        ("/cron/new", {"id": "{cron}-new", "spec": "@daily", "timezone": "UTC", "task_type": "fuzz", "queue": "{queue}",
                       "content_type": "application/json", "payload": "{}", "options": ""}),
        ("/webhooks/new", {"name": "{hook}-new", "url": "https://hooks.example/y", "queues": "{queue}-hook=1",
                           "concurrency": "1", "request_timeout": "30s", "batch_types": "", "new_secret": "s" * 32}),
        ("/tasks/{task}/run", {"next": "/tasks/"}),
        ("/cron/{cron}/edit", {"spec": "@hourly", "timezone": "UTC", "task_type": "fuzz", "queue": "{queue}",
                               "content_type": "text/plain", "payload": "x", "options": '{"priority": 1}'}),
        ("/cron/{cron}/pause", {"next": "/cron/"}),
        ("/webhooks/{hook}/edit", {"url": "https://hooks.example/z", "queues": "{queue}-hook=2", "concurrency": "2",
                                   "request_timeout": "10s", "batch_types": "t", "new_secret": "t" * 32,
                                   "keep_previous": "on"}),
        ("/webhooks/{hook}/pause", {"next": "/webhooks/"}),
    ]  # fmt: skip

    def dashboard(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as client:
            self.log_in(client)
            csrf = {"X-CSRFToken": client.cookies.get("csrftoken", ""), "Referer": self.url + "/"}
            for path, params in self.DASHBOARD_PAGES.items():
                self.dashboard_case(client, "GET", path, None, {}, path)
                for param in params:
                    for label, raw in self.some(self.path_values):
                        self.dashboard_case(
                            client, "GET", f"{path}?{param}={raw}", None, {}, f"{path} ?{param}={label}"
                        )
            for method, template in self.DASHBOARD_PATHS:
                for label, raw in self.some(self.path_values):
                    path = self.dashboard_path(template.replace("{v}", raw), self.fixtures())
                    self.dashboard_case(client, method, path, b"", csrf, f"{method} {template} {label}")
            for template, form in self.DASHBOARD_FORMS:
                for name in form:
                    for label, raw in self.some(self.path_values):
                        fx = self.fixtures()
                        fields = {k: quote(self.dashboard_path(v, fx), safe="") for k, v in form.items()}
                        body = "&".join(f"{k}={raw if k == name else v}" for k, v in fields.items()).encode()
                        self.dashboard_case(client, "POST", self.dashboard_path(template, fx), body, csrf,
                                            f"POST {template} {name}={label}")  # fmt: skip

    def log_in(self, client: httpx.Client) -> None:
        client.get("/admin/login/")
        user, password = self.staff
        response = client.post("/admin/login/", data={"username": user, "password": password, "next": "/",
                                                      "csrfmiddlewaretoken": client.cookies.get("csrftoken", "")})  # fmt: skip
        if response.status_code != 302:
            raise RuntimeError(f"the staff login failed ({response.status_code}): is {user!r} a superuser?")

    @staticmethod
    def dashboard_path(template: str, fx: dict[str, str]) -> str:
        names = {"task": "task_id", "queue": "queue", "cron": "entry_id", "hook": "hook"}
        for name, key in names.items():
            template = template.replace("{" + name + "}", fx[key])
        return template

    def dashboard_case(self, client: httpx.Client, method: str, path: str, body: bytes | None,
                       headers: dict[str, str], case: str) -> None:  # fmt: skip
        if body is not None:
            headers = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
        try:
            response = client.request(method, path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            self.record("dashboard", case, status=599)
            self.report.failures.append(f"[dashboard] {case}: no answer ({type(exc).__name__})")
            return
        self.record("dashboard", case, status=response.status_code, shape=dashboard_problem(response))

    SURFACES = ("rest", "connect", "worker", "events", "auth", "other", "dashboard")

    def run(self, surfaces: tuple[str, ...] = SURFACES) -> Report:
        for name in surfaces:
            try:
                getattr(self, {"auth": "auth_headers", "other": "other_routes"}.get(name, name))()
            except Exception as exc:  # the fuzzer's own failure: report it, go on with the next surface
                self.report.failures.append(f"[{name}] the fuzzer stopped: {type(exc).__name__}: {exc}"[:500])
        return self.report


# -- base bodies ----------------------------------------------------------------------------------


def rest_body(method: str, path: str, fx: dict[str, str]) -> dict[str, Any] | None:
    """A valid body for a REST operation, so a hostile field reaches past the others."""
    if method not in ("POST", "PUT", "PATCH"):
        return None
    task = {"type": "fuzz", "queue": fx["queue"], "process_in": "1h", "metadata": {"k": "v"}, "priority": 5,
            "max_retry": 3, "retry_policy": {"kind": "fixed", "base": "10s"}, "unique_key": "u-" + fx["queue"],
            "group": None, "concurrency_key": "c", "timeout": "30s", "retention": "1h",
            "json": {"a": 1}}  # fmt: skip
    cron = {"id": fx["entry_id"], "spec": "@daily", "task_type": "fuzz", "queue": fx["queue"], "timezone": "UTC",
            "json": {"a": 1}, "options": {"priority": 1, "max_retry": 2, "timeout": "30s",
                                          "metadata": {"k": "v"}, "unique_ttl": "1h"}}  # fmt: skip
    hook = {"name": fx["hook"], "url": "https://hooks.example/x", "queues": {fx["queue"] + "-hook": 1},
            "secrets": ["s" * 32], "concurrency": 2, "batch_types": ["t"], "request_timeout": "10s",
            "paused": True}  # fmt: skip
    bodies = {
        ("POST", "/api/v1/tasks"): task,
        ("POST", "/api/v1/tasks/batch"): {"tasks": [task]},
        ("POST", "/api/v1/tasks/tx"): {"tasks": [task]},
        ("POST", "/api/v1/tasks/bulk"): {
            "action": "cancel",
            "filter": {"queue": fx["queue"] + "-none", "state": "pending"},
        },
        ("POST", "/api/v1/tasks/actions/{action}"): {"ids": [fx["task_id"]], "process_in": "1h"},
        ("POST", "/api/v1/tasks/{task_id}/{action}"): {"process_in": "1h"},
        ("PUT", "/api/v1/queues/{name}/policy"): {"policy": "fifo"},
        ("PUT", "/api/v1/queues/{name}/rate-limit"): {"rate": 1, "burst": 1},
        ("PUT", "/api/v1/queues/{name}/concurrency-limit"): {"limit": 1},
        ("PUT", "/api/v1/groups"): {
            "queue": fx["queue"],
            "group": "g",
            "max_size": 10,
            "max_delay": "1m",
            "grace": "10s",
        },
        ("POST", "/api/v1/cron"): cron,
        ("PUT", "/api/v1/cron/{entry_id}"): {k: v for k, v in cron.items() if k != "id"},
        ("POST", "/api/v1/webhooks"): hook,
        ("PUT", "/api/v1/webhooks/{name}"): {k: v for k, v in hook.items() if k != "name"},
    }
    return bodies.get((method, path), {})


def rest_query(method: str, path: str, fx: dict[str, str]) -> dict[str, str]:
    queries = {
        ("GET", "/api/v1/tasks/count"): {"action": "cancel", "queue": fx["queue"]},
        ("DELETE", "/api/v1/groups"): {"queue": fx["queue"], "group": "g"},
        ("GET", "/api/v1/tasks"): {"queue": fx["queue"]},
    }
    return queries.get((method, path), {})


def connect_base(message: Any, fx: dict[str, str], depth: int = 0) -> dict[str, Any]:
    """A plausible proto3 JSON message of *message* (a descriptor) naming the fixtures."""
    names = {"id": fx["task_id"], "queue": fx["queue"], "name": fx["hook"], "type": "fuzz", "taskType": "fuzz",
             "spec": "@daily", "url": "https://hooks.example/x", "contentType": "application/json",
             "timezone": "UTC", "leaseToken": "x" * 40, "taskId": fx["task_id"], "group": "g",
             "uniqueKey": "u", "concurrencyKey": "c", "error": "boom", "secrets": "s" * 32}  # fmt: skip
    out: dict[str, Any] = {}
    for f in message.fields:
        name = f.json_name
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            out[name] = {"k": 1 if f.message_type.fields_by_name["value"].cpp_type != f.CPPTYPE_STRING else "v"}
            if name == "queues":
                out[name] = {fx["queue"] + "-hook": 1}
            continue
        value: Any
        if f.message_type is not None:
            full = f.message_type.full_name
            if full == "google.protobuf.Duration":
                value = "3600s"
            elif full == "google.protobuf.Timestamp":
                value = "2030-01-01T00:00:00Z"
            elif full in ("google.protobuf.Struct", "google.protobuf.Value"):
                value = {"a": 1}
            elif depth < 2:
                value = connect_base(f.message_type, fx, depth + 1)
            else:
                continue
        elif f.type == f.TYPE_ENUM:
            values = [v.name for v in f.enum_type.values]
            value = values[1] if len(values) > 1 else values[0]
        elif f.type == f.TYPE_BYTES:
            value = base64.b64encode(b'{"a": 1}').decode()
        elif f.cpp_type == f.CPPTYPE_STRING:
            value = names.get(name, "x")
        elif f.cpp_type == f.CPPTYPE_BOOL:
            value = False
        elif f.cpp_type in (f.CPPTYPE_DOUBLE, f.CPPTYPE_FLOAT):
            value = 1.0
        else:
            value = 1
        out[name] = [value] if f.is_repeated else value
    if message.name == "EnqueueRequest":
        for drop in ("processAt", "deadline", "expiresAt", "taskId", "dependsOn", "group"):
            out.pop(drop, None)
    if message.name == "RescheduleTaskRequest":
        out.pop("processAt", None)
    return out


def proto_bodies() -> list[tuple[str, bytes]]:
    """Binary protobuf bodies: broken framing, text protobuf refuses, a 10 MB field."""
    return [
        ("random", bytes(range(7, 64))),
        ("long-length", b"\x0a\xff\xff\xff\xff\x0f"),
        ("long-varint", b"\x08" + b"\xff" * 11),
        ("group", b"\x0b\x0c"),
        ("nul-string", b"\x0a\x03a\x00b"),
        ("invalid-utf8-string", b"\x0a\x03\xed\xa0\x80"),
        ("10MB-string", b"\x0a" + _varint(TEN_MB) + b"x" * TEN_MB),
        ("deep", b"\x0a\x02" * 2000),
    ]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


# -- a node of our own ----------------------------------------------------------------------------


def create_staff(python: str, project: Path, env: dict[str, str]) -> None:
    """The superuser the dashboard surface signs in as, in the node's database."""
    import subprocess

    env = {**env, "DJANGO_SUPERUSER_PASSWORD": STAFF_PASSWORD}
    argv = [
        python,
        "manage.py",
        "createsuperuser",
        "--noinput",
        "--username",
        STAFF_USER,
        "--email",
        "fuzz@example.com",
    ]
    subprocess.run(argv, cwd=project, env=env, check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def fuzz_node(keep: bool = False, project: Path = ROOT) -> Iterator[tuple[str, Callable[[], str]]]:
    """``conveyord`` of *project* (this checkout, or another with its own ``.venv``) on a
    private PostgreSQL database and Redis channel prefix; yields (url, output)."""
    import subprocess

    import psycopg

    from bench.chaos_rig import free_port, wait_for

    database = f"conveyor_fuzz_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{database}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "DATABASE_URL", "REDIS_URL"))}
    env.update(DATABASE_URL=url, REDIS_URL=REDIS_URL, DJANGO_SETTINGS_MODULE="conveyor_site.settings",
               DJANGO_SECRET_KEY=SECRET_KEY, PYTHONUNBUFFERED="1", CONVEYOR_CHANNEL_PREFIX=f"fuzz{uuid.uuid4().hex[:8]}",
               CONVEYOR_API_TOKENS=TOKEN)  # fmt: skip
    python = sys.executable if project == ROOT else str(project / ".venv" / "bin" / "python")
    env["PYTHONPATH"] = str(project)
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v0"], cwd=project, env=env, check=True)
    create_staff(python, project, env)
    log = Path(tempfile.mkdtemp(prefix="conveyor-fuzz-")) / "node.log"
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen([python, "manage.py", "conveyord", "--host", "127.0.0.1", "--port", str(port)],
                                cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"conveyord exited:\n{log.read_text()[-3000:]}")
            return "listening on" in log.read_text()

        wait_for(listening, 90, "conveyord to listen")
        yield f"http://127.0.0.1:{port}", lambda: log.read_text(errors="replace")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if keep:
            print(f"kept: database {database}, log {log}")
        else:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            log.unlink(missing_ok=True)
            log.parent.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the short form (about 800 inputs)")
    parser.add_argument("--surface", action="append", choices=Fuzzer.SURFACES, help="only this one (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the database and the node's log")
    parser.add_argument("--project", type=Path, default=ROOT, help="run the node of this checkout (default: this one)")
    args = parser.parse_args()
    # SIGTERM ends the run as Ctrl-C does: the node is stopped and the database dropped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    started = time.monotonic()
    with fuzz_node(args.keep, args.project.resolve()) as (url, output):
        report = Fuzzer(url, output, short=args.short).run(tuple(args.surface or Fuzzer.SURFACES))
    print(report.table())
    print(f"\n{len(report.failures)} failures in {time.monotonic() - started:.0f}s")
    for failure in report.failures:
        print(" ", failure)
    sys.exit(0 if report.clean else 1)


if __name__ == "__main__":
    main()
