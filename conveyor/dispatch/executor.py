"""Database work off the event loop, on a small pool of threads.

Django's ``sync_to_async`` funnels everything through one shared thread by
default; the dispatch hot path would serialize behind it. This pool gives
the node several threads, each with its own persistent connection.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")


def _with_fresh_connection[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # Drop a connection that broke (e.g. Postgres restarted) so this call
    # reconnects instead of failing forever. Cheap when nothing went wrong.
    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()
    return fn(*args, **kwargs)


def single_writer() -> bool:
    """SQLite has one writer: threads racing for it stall in its busy handler."""
    return connections["default"].vendor == "sqlite"


class DatabaseExecutor:
    def __init__(self, threads: int) -> None:
        # On SQLite one thread does all the database work, so no two of our
        # transactions ever wait on each other's write lock.
        count = 1 if single_writer() else max(1, threads)
        self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="conveyor-db")

    @property
    def pool(self) -> ThreadPoolExecutor:
        return self._pool

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        call = functools.partial(_with_fresh_connection, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
