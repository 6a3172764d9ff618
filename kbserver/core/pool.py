"""A least-recently-used pool of open resources (repositories, indexes) under one memory budget.

Each kind of value registers how to open, close and weigh it (`LeasePool.kind`). Weights are read
again whenever the pool checks its budget, since an open value's caches grow while it is used. A
leased value is never closed under its user: eviction or `drop` only marks it, and the last lease
closes it. The values of the name being opened or leased are never the ones evicted for it.
A value is opened outside the pool's lock (one opener per key, the others wait for it), so opening
one cold KB never holds up the leases of the others.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Kind", "LeasePool"]

V = TypeVar("V")


@dataclass
class _Entry:
    value: Any
    kind: Kind[Any]
    users: int = 0
    doomed: bool = False  # dropped or evicted while leased: closed by the last user


@dataclass
class LeasePool:
    """Values of every kind share `budget` (bytes); the least recently used go first."""

    budget: int
    # Called after the pool closed values, outside its lock: the composition hands the memory they
    # freed back to the system (kbserver.core.trim), which the allocator would otherwise keep.
    released: Callable[[], object] = lambda: None
    _items: OrderedDict[tuple[str, str], _Entry] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _opening: dict[tuple[str, str], threading.Event] = field(default_factory=dict)  # set once opened

    def kind(
        self,
        name: str,
        open_: Callable[[str], V],
        close: Callable[[V], None],
        weigh: Callable[[V], int] = lambda _v: 1,
    ) -> Kind[V]:
        """The handle through which values of kind `name` are opened, leased and dropped."""
        return Kind(self, name, open_, close, weigh)

    def weight(self) -> int:
        """What every open value weighs now."""
        with self._lock:
            return sum(e.kind.weigh(e.value) for e in self._items.values())

    def held(self) -> list[tuple[str, str]]:
        """(kind, name) of every open value, least recently used first."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _acquire(self, kind: Kind[V], name: str, lease: bool) -> _Entry:
        key = (kind.name, name)
        while True:
            with self._lock:
                entry = self._items.get(key)
                if entry is not None:
                    doomed = self._use(key, entry, lease)
                    break
                opening = self._opening.get(key)
                if opening is None:
                    mine = self._opening[key] = threading.Event()  # this thread opens it
                    break
            opening.wait()  # another thread opens it (one key is never opened twice: one index writer)
        if entry is None:
            try:
                value = kind.open_(name)  # outside the pool's lock: leases of other keys go on
            except BaseException:
                with self._lock:
                    del self._opening[key]
                mine.set()  # a waiter tries again (and meets the error itself)
                raise
            with self._lock:
                entry = self._items[key] = _Entry(value, kind)
                del self._opening[key]
                doomed = self._use(key, entry, lease)
            mine.set()
        self._close(doomed)
        return entry

    def _use(self, key: tuple[str, str], entry: _Entry, lease: bool) -> list[_Entry]:
        """Mark `entry` used (and leased); what to close for the budget. Call with the lock held."""
        self._items.move_to_end(key)
        if lease:
            entry.users += 1
        return self._evict(keep=key[1])

    def _acquire_open(self, kind: Kind[V], name: str) -> _Entry | None:
        with self._lock:
            entry = self._items.get((kind.name, name))
            if entry is not None:
                entry.users += 1
            return entry

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            close = entry.doomed and entry.users == 0
        if close:
            self._close([entry])

    def _evict(self, keep: str | None = None) -> list[_Entry]:
        """Unlink least recently used entries beyond the budget (call with the lock held), but none
        named `keep`: the values of the KB in use (its repository, index and vectors) stay open
        together even when they alone weigh more than the budget, since evicting one of them to open
        another would close them in turn on every call."""
        total = sum(e.kind.weigh(e.value) for e in self._items.values())
        out: list[_Entry] = []
        for key in list(self._items):
            if total <= self.budget or len(self._items) <= 1:
                break
            if key[1] == keep:
                continue
            entry = self._items.pop(key)
            total -= entry.kind.weigh(entry.value)
            if entry.users:
                entry.doomed = True
            else:
                out.append(entry)
        return out

    def trim(self) -> None:
        """Close what is over the budget now."""
        with self._lock:
            doomed = self._evict()
        self._close(doomed)

    def _close(self, entries: list[_Entry]) -> None:
        """Close `entries`, taken out of the pool and used by nobody, then call `released`."""
        for e in entries:
            e.kind.close(e.value)
        if entries:
            self.released()

    def _drop(self, key: tuple[str, str]) -> None:
        while True:  # a value being opened is dropped once it is there
            with self._lock:
                opening = self._opening.get(key)
                if opening is None:
                    break
            opening.wait()
        with self._lock:
            entry = self._items.pop(key, None)
            if entry is None:
                return
            close = entry.users == 0
            entry.doomed = not close
        if close:
            self._close([entry])

    def _names(self, kind: str) -> list[str]:
        with self._lock:
            return [name for k, name in self._items if k == kind]

    def close(self, kind: str | None = None) -> None:
        """Close every value (of `kind`) not in use; leased ones close when released."""
        with self._lock:
            keys = [key for key in self._items if kind is None or key[0] == kind]
            entries = [self._items.pop(key) for key in keys]
            for e in entries:
                e.doomed = e.users > 0
        self._close([e for e in entries if not e.doomed])


@dataclass(frozen=True)
class Kind(Generic[V]):
    """One kind of value in a pool: open, lease, drop by name."""

    pool: LeasePool
    name: str
    open_: Callable[[str], V]
    close: Callable[[V], None]
    weigh: Callable[[V], int]

    @contextlib.contextmanager
    def lease(self, name: str) -> Iterator[V]:
        """The open value `name`, never closed while leased (whatever `open_` raises propagates)."""
        entry = self.pool._acquire(self, name, lease=True)
        try:
            yield entry.value
        finally:
            self.pool._release(entry)

    @contextlib.contextmanager
    def lease_if_open(self, name: str) -> Iterator[V | None]:
        """Like `lease`, but None when `name` is not open (never opens it, never refreshes it)."""
        entry = self.pool._acquire_open(self, name)
        try:
            yield None if entry is None else entry.value
        finally:
            if entry is not None:
                self.pool._release(entry)

    def get(self, name: str) -> V:
        """The open value `name`, marked as just used but not leased: for values that stay usable
        after `close` (a dulwich repository reopens its packs)."""
        value: V = self.pool._acquire(self, name, lease=False).value
        return value

    def drop(self, name: str) -> None:
        """Forget `name`; its value is closed now, or by its last user."""
        self.pool._drop((self.name, name))

    def names(self) -> list[str]:
        return self.pool._names(self.name)

    def close_all(self) -> None:
        self.pool.close(self.name)
