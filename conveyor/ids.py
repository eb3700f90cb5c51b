"""ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32.

Generated from the injected clock so ids sort by (fake) time in tests. Ids
made in the same millisecond increment the random part, so one process
never hands out two equal ids and ids from one process sort in order.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0
_RAND_MAX = (1 << 80) - 1


_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]  # every two digits, by their 10 bits


def _encode(value: int, length: int) -> str:
    """*value* (below 32 ** *length*) as *length* Crockford base32 digits, most significant first."""
    odd = length % 2
    head = ALPHABET[value >> (5 * (length - 1))] if odd else ""
    return head + "".join([_PAIRS[(value >> shift) & 1023] for shift in range(5 * (length - odd) - 10, -1, -10)])


def new_ulid(when: datetime) -> str:
    """Return a new ULID for time *when*."""
    global _last_ms, _last_rand
    ms = int(when.timestamp() * 1000)
    with _lock:
        if ms <= _last_ms and _last_rand < _RAND_MAX:
            ms, rand = _last_ms, _last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave room to increment
        _last_ms, _last_rand = ms, rand
    return _encode(ms << 80 | rand, 26)


def new_ulids(when: datetime, count: int) -> list[str]:
    return [new_ulid(when) for _ in range(count)]


def random_token(nbytes: int = 16) -> str:
    """Return an unguessable url-safe token."""
    return _encode(int.from_bytes(os.urandom(nbytes), "big"), (nbytes * 8 + 4) // 5)
