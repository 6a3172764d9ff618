"""The one async boundary: blocking work from an event loop runs on anyio's thread pool, under one limiter."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

import anyio.to_thread

__all__ = ["DEFAULT_THREADS", "run", "size_limiter"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

DEFAULT_THREADS = 40  # anyio's own default


async def run(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """`fn(*args)` on a pool thread, under the event loop's one thread limiter: the same pool and
    limit as Starlette's `run_in_threadpool` and the MCP SDK's synchronous tools (never
    `asyncio.to_thread`, whose executor would be a second pool beside it)."""
    return await anyio.to_thread.run_sync(fn, *args)


def size_limiter(threads: int) -> None:
    """Let at most `threads` blocking calls of this event loop run at once (on the loop, at startup)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads
