"""The PostgreSQL store's statements, loaded by name from ``queries.sql``.

A statement starts at a ``-- name: NAME`` line and a fragment at a
``-- fragment: NAME`` line; each runs to the next such line. Comment lines
are kept in the file for the reader and left out of what is sent. A
statement's ``{fragment}`` markers are filled by ``statement(name, **parts)``
from the fragments or from generated column lists; the result is cached, so
each variant is built once per process.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

_HEADER = re.compile(r"^-- (name|fragment): (\w+)\s*$")


QUERIES = Path(__file__).with_name("queries.sql")


@functools.cache
def _sections() -> tuple[dict[str, str], dict[str, str]]:
    return load(QUERIES)


def load(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The statements and fragments of the file at *path*, by name."""
    statements: dict[str, list[str]] = {}
    fragments: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text().splitlines():
        header = _HEADER.match(line)
        if header:
            kind, name = header.groups()
            current = (statements if kind == "name" else fragments).setdefault(name, [])
        elif current is not None and not line.lstrip().startswith("--"):
            if "--" in line:
                raise ValueError(f"queries.sql: a comment after code would hide the rest of its statement: {line!r}")
            current.append(line.strip())
    join = lambda lines: " ".join(part for part in lines if part)  # noqa: E731
    return {k: join(v) for k, v in statements.items()}, {k: join(v) for k, v in fragments.items()}


def fragment(name: str) -> str:
    return _sections()[1][name]


@functools.cache
def statement(name: str, **parts: str) -> str:
    """Statement *name* with its ``{marker}`` parts filled in (each from *parts*)."""
    text = _sections()[0][name]
    return text.format(**parts) if parts else text
