"""Retry backoff: how long a failed attempt waits before it is due again."""

from __future__ import annotations

import random
from dataclasses import dataclass

POLICIES = ("exponential", "linear", "fixed")


@dataclass(frozen=True)
class RetryPolicy:
    kind: str = "exponential"
    base: float = 2.0
    cap: float = 900.0


def backoff_delay(policy: RetryPolicy, retried: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after a failure; *retried* is counted before the increment.

    exponential: uniform[0, min(base * 2**retried, cap)) (full jitter)
    linear:      uniform[0, min(base * (retried + 1), cap))
    fixed:       min(base, cap)
    """
    rng = rng or random
    if policy.kind == "fixed":
        return min(policy.base, policy.cap)
    if policy.kind == "linear":
        ceiling = min(policy.base * (retried + 1), policy.cap)
    else:
        # Cap the exponent so 2**retried stays a small float for huge counts.
        ceiling = min(policy.base * (2.0 ** min(retried, 60)), policy.cap)
    return rng.random() * ceiling
