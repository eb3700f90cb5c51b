"""What a task list, a count and a bulk job select: the filter and its ``where`` conditions.

A condition names a value inside a task: ``payload.user_id = 42`` (a path of
object keys into the JSON payload) or ``metadata.tenant = acme`` (one
metadata key). Conditions are joined by ``and``. A value is a JSON scalar
(``42``, ``"42"``, ``true``, ``null``) or a bare word, read as a string.
Only plaintext JSON payloads can match a payload condition: a payload sealed
at rest or end to end is bytes the server cannot read (docs/search.md).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from conveyor.broker.validation import check_queue_name, check_storable
from conveyor.exceptions import InvalidArgument
from conveyor.states import ALL_STATES

WHERE_MAX_CONDITIONS = 8
WHERE_MAX = 2000
CONTAINS_MAX = 200
# A key is anything but a dot, "=", a quote or space; a path has at most 8 keys.
_CONDITION = re.compile(r'\s*(payload|metadata)((?:\.[^.\s="\\]+){1,8})\s*=\s*')
_AND = re.compile(r"\s+and\s+|\s*$", re.IGNORECASE)
_BARE = re.compile(r'[^\s"]+')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Condition:
    """``source.path = value``: *source* "payload" or "metadata"."""

    source: str
    path: tuple[str, ...]
    value: Any

    def __str__(self) -> str:
        return f"{self.source}.{'.'.join(self.path)} = {json.dumps(self.value)}"

    def as_object(self) -> dict[str, Any]:
        """The condition as the object a JSON containment test looks for (``{"a": {"b": 42}}``)."""
        value: Any = self.value
        for key in reversed(self.path):
            value = {key: value}
        return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class TaskFilter:
    """Everything the task list filters by; the empty filter matches every task."""

    queue: str = ""
    state: str = ""
    type: str = ""
    search: str = ""  # an id, id prefix, unique key or concurrency key
    where: tuple[Condition, ...] = field(default=())
    contains: str = ""  # a substring of the payload's text

    def as_params(self) -> dict[str, str]:
        """The filter as query parameters (non-empty ones), as the API and the dashboard take them."""
        params = {"queue": self.queue, "state": self.state, "type": self.type, "search": self.search,
                  "where": " and ".join(str(c) for c in self.where), "contains": self.contains}  # fmt: skip
        return {k: v for k, v in params.items() if v}


def parse_filter(params: Any) -> TaskFilter:
    """A ``TaskFilter`` from query parameters (a mapping of str); bad ones raise
    ``InvalidArgument`` naming the parameter."""

    def text(name: str) -> str:
        value = params.get(name) or ""
        if not isinstance(value, str):
            raise InvalidArgument(name, "must be a string")
        return value.strip()

    state = text("state")
    if state and state not in ALL_STATES:
        raise InvalidArgument("state", f"must be one of {', '.join(ALL_STATES)}")
    queue = text("queue")
    contains = text("contains")
    if len(contains) > CONTAINS_MAX:
        raise InvalidArgument("contains", f"must be at most {CONTAINS_MAX} characters")
    for name in ("type", "search", "contains"):
        check_storable(text(name), name)
    return TaskFilter(
        queue=check_queue_name(queue) if queue else "",
        state=state,
        type=text("type"),
        search=text("search"),
        where=parse_where(text("where")),
        contains=contains,
    )


def parse_where(text: str, name: str = "where") -> tuple[Condition, ...]:
    """The conditions of *text* (``payload.a.b = 42 and metadata.k = v``)."""
    conditions: list[Condition] = []
    pos, text = 0, check_storable(text.strip(), name)
    if len(text) > WHERE_MAX:
        raise InvalidArgument(name, f"must be at most {WHERE_MAX} characters")
    while pos < len(text):
        head = _CONDITION.match(text, pos)
        if head is None:
            raise InvalidArgument(
                name, f"expected payload.<path> = <value> or metadata.<key> = <value> at {text[pos : pos + 30]!r}"
            )
        source, path = head.group(1), tuple(head.group(2)[1:].split("."))
        if source == "metadata" and len(path) != 1:
            raise InvalidArgument(name, "metadata is one level deep: metadata.<key> = <value>")
        value, pos = _value(text, head.end(), name)
        if source == "metadata" and not isinstance(value, str):
            value = json.dumps(value)  # metadata values are strings: metadata.n = 42 means "42"
        conditions.append(Condition(source, path, value))
        gap = _AND.match(text, pos)
        if gap is None:
            raise InvalidArgument(name, f"expected 'and' between conditions at {text[pos : pos + 30]!r}")
        pos = gap.end()
    if len(conditions) > WHERE_MAX_CONDITIONS:
        raise InvalidArgument(name, f"must have at most {WHERE_MAX_CONDITIONS} conditions")
    return tuple(conditions)


def _value(text: str, pos: int, name: str) -> tuple[Any, int]:
    """A JSON scalar or a bare word at *pos*, and where it ends."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError:
        bare = _BARE.match(text, pos)
        if bare is None:
            raise InvalidArgument(name, f"a condition needs a value at {text[pos : pos + 30]!r}") from None
        return bare.group(0), bare.end()
    if isinstance(value, float) and not math.isfinite(value):
        value = text[pos:end]  # NaN, Infinity: JSON has no such numbers; the word itself
    if isinstance(value, (dict, list)):
        raise InvalidArgument(name, "a value is a string, number, true, false or null")
    if end < len(text) and not text[end].isspace():
        # "42abc" or "true1": not a JSON value, a bare word.
        bare = _BARE.match(text, pos)
        return bare.group(0), bare.end()  # type: ignore[union-attr]
    return value, end
