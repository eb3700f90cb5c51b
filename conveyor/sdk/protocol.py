"""The worker WebSocket protocol, version 1: frame names, close codes, encoding.

Shared by the server and the SDK; imports nothing from Django. The normative
description is ``docs/protocol.md``.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1
WORKER_PATH = "/ws/worker"

# Worker -> server frames.
HELLO = "hello"
RESULT = "result"
BATCH_RESULT = "batch_result"
HEARTBEAT = "heartbeat"
PROGRESS = "progress"
CREDIT = "credit"
STARTED = "started"  # only on a session welcomed with a prefetch window
WORKER_FRAMES = (HELLO, RESULT, BATCH_RESULT, HEARTBEAT, PROGRESS, CREDIT, STARTED)

# The prefetch window: dispatches a worker may hold beyond its concurrency.
MAX_PREFETCH = 1000

# Server -> worker frames.
WELCOME = "welcome"
DISPATCH = "dispatch"
BATCH_DISPATCH = "batch_dispatch"
CANCEL = "cancel"
PING = "ping"
ERROR = "error"

# Result outcomes.
SUCCESS = "success"
RETRY = "retry"
SKIP_RETRY = "skip_retry"
RELEASED = "released"
OUTCOMES = (SUCCESS, RETRY, SKIP_RETRY, RELEASED)

# WebSocket close codes the server uses.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  # the worker (or a proxy) is leaving
CLOSE_SERVICE_RESTART = 1012  # the node is shutting down: reconnect elsewhere
CLOSE_PROTOCOL_ERROR = 4400  # a malformed or out-of-order frame
CLOSE_UNAUTHENTICATED = 4401  # missing or wrong bearer token
CLOSE_FORBIDDEN = 4403  # the token lacks the consume scope, or may not serve a queue the hello names
CLOSE_VERSION = 4406  # incompatible SDK / server versions
CLOSE_HELLO_TIMEOUT = 4408  # no hello within the handshake timeout

# Codes a worker treats as "do not reconnect": the server refused us.
FATAL_CLOSE_CODES = (CLOSE_UNAUTHENTICATED, CLOSE_FORBIDDEN, CLOSE_VERSION, CLOSE_PROTOCOL_ERROR)


# JSON text as the SDK sends request bodies and the server stores a task's
# ``json`` payload: compact, UTF-8 as it is, no NaN or Infinity (ValueError).
# One encoder made once: ``json.dumps`` with options builds one per call.
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


# What json.dumps(..., separators=(",", ":")) gives, from one encoder made
# once (json.dumps with an option builds one per call, and the SDK and the
# node encode a message per turn of their loops).
_frames_json = json.JSONEncoder(separators=(",", ":")).encode


def encode_frames(frames: list[dict[str, Any]]) -> str:
    """One WebSocket text message: a single frame object, or an array of several."""
    return _frames_json(frames[0] if len(frames) == 1 else frames)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One strict decoder, made once (json.loads with an option builds one per call).
_strict_json = json.JSONDecoder(parse_constant=_refuse_constant).decode


def decode_frames(text: str) -> list[dict[str, Any]]:
    """Parse a message into frames; raise ``ValueError`` when it is malformed."""
    try:
        # Strict JSON: Python's parser would take NaN and Infinity.
        # (json.loads also takes bytes, decoded by their first bytes' encoding.)
        data = _strict_json(text) if type(text) is str else json.loads(text, parse_constant=_refuse_constant)
    except (TypeError, ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than the parser's limit.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ValueError(f"message is not valid JSON: {reason}") from None
    frames = data if isinstance(data, list) else [data]
    if not frames:
        raise ValueError("message is an empty array")
    for frame in frames:
        if not isinstance(frame, dict):
            raise ValueError("each frame must be a JSON object")
        if not isinstance(frame.get("type"), str):
            raise ValueError("each frame needs a string 'type'")
    return frames


def version_tuple(text: str) -> tuple[int, ...]:
    """``"1.2.3"`` -> (1, 2, 3), comparable across lengths.

    Each part counts by its leading digits (``"3-rc1"`` is 3, not 31; a
    leading ``v`` is ignored; junk counts as 0) and trailing zero parts are
    dropped, so ``"0.1"`` and ``"0.1.0"`` compare equal.
    """
    parts = []
    for piece in (text or "0").strip().lstrip("vV").split("."):
        digits = ""
        for ch in piece:
            if not ch.isascii() or not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)
