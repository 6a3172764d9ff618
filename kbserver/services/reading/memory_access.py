"""Retrievals of memories: how often and when each was found, and its importance reinforced by use.

Kept in the control plane, never in git: a search must not make a version (CONTRACT §5, `semantic`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kbserver.control import MemoryAccessRow
from kbserver.core.model import Caller
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services

__all__ = ["MemoryAccessRow", "record", "reset_importance", "stats"]


def stats(services: Services, caller: Caller, slug: str, ids: Sequence[str]) -> dict[str, MemoryAccessRow]:
    """The retrieval rows of the memories `ids` of `slug` (those never retrieved are missing).

    Raises NotFound (a KB the caller cannot read)."""
    require_read(services, caller, slug)
    return services.control.memory_access(slug, ids)


def record(
    services: Services, caller: Caller, slug: str, retrieved: Mapping[str, float], keep: float
) -> dict[str, MemoryAccessRow]:
    """Count one retrieval of each memory (id -> its file's importance) now, reinforcing its importance
    as `keep * s + (1 - keep)`; the new rows. Raises NotFound."""
    require_read(services, caller, slug)
    if not retrieved:
        return {}
    return services.control.record_memory_access(slug, retrieved, time.time(), keep)


def reset_importance(
    services: Services, caller: Caller, slug: str, memory_id: str, importance: float
) -> None:
    """The memory's file got a new importance: its effective importance starts again from it."""
    require_read(services, caller, slug)
    services.control.set_memory_importance(slug, memory_id, importance)
