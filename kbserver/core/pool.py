"""A least-recently-used pool of open resources (repositories, indexes) under a budget, with leases."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["LeasePool"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Entry(Generic[V]):
    value: V
    users: int = 0
    doomed: bool = False  # dropped or evicted while leased: closed by the last user


class LeasePool(Generic[K, V]):
    """Opens values on demand and closes the least recently used ones once `weight` exceeds `budget`.

    A leased value is never closed under its user: eviction or `drop` only marks it, and the last
    lease closes it. `weigh(value)` is the value's cost in budget units (default 1 each).
    """

    def __init__(
        self,
        open_: Callable[[K], V],
        close: Callable[[V], None],
        budget: int,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        self._open = open_
        self._close = close
        self.budget = max(1, budget)
        self._weigh = weigh or (lambda _v: 1)
        self._items: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lease(self, key: K) -> Iterator[V]:
        """The open value of `key` (opened now if needed; whatever `open_` raises propagates)."""
        entry = self._acquire(key)
        try:
            yield entry.value
        finally:
            self._release(entry)

    def _acquire(self, key: K) -> _Entry[V]:
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                self._items.move_to_end(key)
                entry.users += 1
                return entry
            # Opened under the pool lock: two threads must not open one key twice (one index writer).
            entry = _Entry(self._open(key), users=1)
            self._items[key] = entry
            doomed = self._evict()
        for value in doomed:
            self._close(value)
        return entry

    def _release(self, entry: _Entry[V]) -> None:
        with self._lock:
            entry.users -= 1
            close = entry.doomed and entry.users == 0
        if close:
            self._close(entry.value)

    def _evict(self) -> list[V]:
        """Unlink least recently used entries beyond the budget (call with the lock held)."""
        total = sum(self._weigh(e.value) for e in self._items.values())
        out: list[V] = []
        for key in list(self._items):
            if total <= self.budget or len(self._items) <= 1:
                break
            entry = self._items.pop(key)
            total -= self._weigh(entry.value)
            if entry.users:
                entry.doomed = True
            else:
                out.append(entry.value)
        return out

    def trim(self) -> None:
        """Close what is over the budget now (weights grow while values are used)."""
        with self._lock:
            doomed = self._evict()
        for value in doomed:
            self._close(value)

    def drop(self, key: K) -> None:
        """Forget `key`; its value is closed now, or by its last user."""
        with self._lock:
            entry = self._items.pop(key, None)
            if entry is None:
                return
            close = entry.users == 0
            entry.doomed = not close
        if close:
            self._close(entry.value)

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def close(self) -> None:
        """Close every value not in use; leased ones close when released."""
        with self._lock:
            entries = list(self._items.values())
            self._items.clear()
            idle = [e.value for e in entries if e.users == 0]
            for e in entries:
                e.doomed = e.users > 0
        for value in idle:
            self._close(value)
