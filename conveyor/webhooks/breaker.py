"""Per-endpoint circuit breaker: a dead endpoint gets no capacity, only probes."""

from __future__ import annotations

from collections import deque

WINDOW = 10
MIN_SAMPLES = 3
FAILURE_RATIO = 0.5
PROBE_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)

CLOSED, OPEN, PROBING = "closed", "open", "probing"


class EndpointBreaker:
    """Transport failures (not JSON-RPC outcome errors) open it.

    Open: the gateway offers no capacity, so tasks wait pending instead of
    burning attempts. After a backoff one probe slot is offered; the first
    success closes the breaker, a failure opens it again for longer.
    """

    def __init__(self) -> None:
        self.state = CLOSED
        self.samples: deque[bool] = deque(maxlen=WINDOW)
        self.opened = 0
        self.retry_at = 0.0

    def success(self) -> bool:
        """Record a well-formed answer; True if this closed the breaker."""
        self.samples.append(True)
        if self.state != CLOSED:
            self.state, self.opened = CLOSED, 0
            self.samples.clear()
            return True
        return False

    def failure(self, now: float) -> bool:
        """Record a transport failure; True if this opened the breaker."""
        self.samples.append(False)
        if self.state == PROBING:
            return self._open(now)
        if (
            self.state == CLOSED
            and len(self.samples) >= MIN_SAMPLES
            and self.samples.count(False) / len(self.samples) >= FAILURE_RATIO
        ):
            return self._open(now)
        return False

    def _open(self, now: float) -> bool:
        self.state = OPEN
        self.retry_at = now + PROBE_BACKOFF[min(self.opened, len(PROBE_BACKOFF) - 1)]
        self.opened += 1
        return True

    def probe_due(self, now: float) -> bool:
        return self.state == OPEN and now >= self.retry_at

    def start_probe(self) -> None:
        self.state = PROBING
