"""Hand the memory that closed KBs freed back to the system (glibc's `malloc_trim`).

Closing an index or a repository frees megabytes that malloc keeps for reuse, spread over the
arenas of the request threads, so RSS stayed well above what the server used (docs/performance.md,
"Server memory with many KBs"). A trim costs a few milliseconds at most, so it runs at most every
`MIN_SECONDS`. Where there is no `malloc_trim` (not glibc), it does nothing.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable

__all__ = ["MIN_SECONDS", "give_back"]

MIN_SECONDS = 0.1
_lock = threading.Lock()
_last = -MIN_SECONDS


def _find() -> Callable[[int], int] | None:
    try:
        found: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return found


_malloc_trim = _find()


def give_back() -> bool:
    """Trim malloc's free memory now, unless one did less than `MIN_SECONDS` ago; True if it ran."""
    global _last
    if _malloc_trim is None:
        return False
    with _lock:
        now = time.monotonic()
        if now - _last < MIN_SECONDS:
            return False
        _last = now
    _malloc_trim(0)
    return True
