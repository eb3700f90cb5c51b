"""Parse and format durations: ``"30s"``, ``"1.5m"``, ``"2h"``, ``"7d"`` or plain seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Return *value* in seconds; raise ``ValueError`` when it is not a duration.

    Numbers are seconds. Strings are a number with an optional unit, or a
    sequence of unit parts as Go and protobuf JSON write them (``"1m30s"``).
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration, got a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise ValueError(f"expected a duration, got {type(value).__name__}")
    if seconds != seconds or seconds < 0:  # NaN or negative
        raise ValueError("a duration must be zero or positive")
    return seconds


def _parse_text(text: str) -> float:
    if not text:
        raise ValueError("empty duration")
    try:
        return float(text)
    except ValueError:
        pass
    total, pos = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"invalid duration {text!r}; use e.g. 30s, 5m, 2h, 7d")
    return total


def format_duration(seconds: float) -> str:
    """Format *seconds* as protobuf JSON does: ``"30s"``, ``"1.5s"``."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.6f}".rstrip("0") + "s"
