"""Per-task-type circuit breaker: slow a failing type down to probe speed."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

WINDOW = 20
MIN_SAMPLES = 10
FAILURE_RATIO = 0.5
OPEN_FOR = 30.0


@dataclass
class _TypeState:
    outcomes: deque[bool] = field(default_factory=lambda: deque(maxlen=WINDOW))
    open_until: float = 0.0


class TypeBreaker:
    """Opens for a type when at least half of its last outcomes (>= 10) failed.

    While open, the credit a finished task of that type frees comes back
    only after a probe delay, so a broken handler is fed slowly instead of
    burning through the queue's retries. After ``OPEN_FOR`` seconds the
    window restarts.
    """

    def __init__(self, probe_delay: float = 1.0) -> None:
        self.probe_delay = probe_delay
        self._types: dict[str, _TypeState] = {}

    def record(self, task_type: str, ok: bool, now: float) -> None:
        state = self._types.setdefault(task_type, _TypeState())
        if state.open_until and now >= state.open_until:
            state.open_until = 0.0
            state.outcomes.clear()
        state.outcomes.append(ok)
        failures = state.outcomes.count(False)
        if (
            not state.open_until
            and len(state.outcomes) >= MIN_SAMPLES
            and failures / len(state.outcomes) >= FAILURE_RATIO
        ):
            state.open_until = now + OPEN_FOR

    def is_open(self, task_type: str, now: float) -> bool:
        state = self._types.get(task_type)
        return bool(state and state.open_until > now)

    def refund_delay(self, task_type: str, now: float) -> float:
        return self.probe_delay if self.is_open(task_type, now) else 0.0
