"""Presentation helpers: durations, relative times, payload bodies, hex dumps."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor.sealing import end_to_end_key_id
from conveyor.states import State

# Display order of the task states: the waiting ones first, then running, then finished.
STATE_ORDER = [
    State.PENDING,
    State.SCHEDULED,
    State.ACTIVE,
    State.RETRY,
    State.BLOCKED,
    State.AGGREGATING,
    State.COMPLETED,
    State.ARCHIVED,
    State.CANCELED,
]
STATE_NAMES = [s.value for s in STATE_ORDER]
SWEEPERS = ("scheduler", "reaper", "groups")

BODY_SHOW_MAX = 256 * 1024  # characters of JSON/text shown before truncating
HEX_SHOW_MAX = 4096  # bytes of a binary body shown as hex


def span(seconds: float) -> str:
    """A compact duration: 45s, 5m 3s, 2h 10m, 3d 4h."""
    s = int(abs(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m" if s % 3600 // 60 else f"{s // 3600}h"
    return f"{s // 86400}d {s % 86400 // 3600}h" if s % 86400 // 3600 else f"{s // 86400}d"


def relative(when: datetime, now: datetime) -> str:
    delta = (when - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


@dataclass(frozen=True)
class Body:
    """A payload or result, ready to show."""

    size: int
    kind: str  # empty | json | text | binary | encrypted (text: the key id) | unreadable (text: why)
    text: str = ""
    truncated: bool = False


def present_payload(task: Any) -> Body:
    """A task's payload: its body, or that its producer sealed it end to end
    (the server has no key for it), or why this node cannot open it."""
    if task.seal_error:
        return Body(0, "unreadable", task.seal_error)
    key_id = end_to_end_key_id(task.payload, task.metadata)
    if key_id is not None:
        return Body(len(task.payload), "encrypted", key_id)
    return present_body(task.payload, task.content_type)


def present_body(raw: bytes | memoryview | None, content_type: str) -> Body:
    data = bytes(raw) if raw is not None else b""
    if not data:
        return Body(0, "empty")
    content_type = (content_type or "").lower()
    if "json" in content_type:
        try:
            text = json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=False)
        except (ValueError, UnicodeDecodeError):
            pass
        else:
            return _text(len(data), "json", text)
    if content_type.startswith("text/") or "xml" in content_type:
        try:
            return _text(len(data), "text", data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return Body(len(data), "binary", hex_dump(data[:HEX_SHOW_MAX]), truncated=len(data) > HEX_SHOW_MAX)


def _text(size: int, kind: str, text: str) -> Body:
    if len(text) > BODY_SHOW_MAX:
        return Body(size, kind, text[:BODY_SHOW_MAX], truncated=True)
    return Body(size, kind, text)


def hex_dump(data: bytes, width: int = 16) -> str:
    """Offset, hex bytes and printable ASCII, 16 bytes a line (like ``hexdump -C``)."""
    lines = []
    for offset in range(0, len(data), width):
        chunk = data[offset : offset + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {hexes:<{width * 3 - 1}}  |{text}|")
    return "\n".join(lines)


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"
