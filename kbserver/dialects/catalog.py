"""Catalogues: the parsed records of one folder of a KB, kept in step with main version by version.

A dialect that needs all its records (the memory set's filters and look-alikes, the typed set's
compiled files) would otherwise list its folder and parse every file on every call, which costs
hundreds of milliseconds at 10,000 records. A catalogue is built once per KB and folder, records the
version it reflects, and moves to a newer head by the tree diff between the two (only the files that
changed are read and parsed); after a dialect's own write it moves without any diff, since it knows
what it wrote (`Catalog.note`). Everything is read through the services (files.*), never the store.

An optional `terms` function keeps an inverted index of each record's words, from which
`Catalog.similar` finds the records whose word overlap (Jaccard) reaches a threshold without
scoring them all (prefix filtering: a set overlapping enough must share one of its rarest words).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.dialects.session import DialectCall, Written
from kbserver.services.reading import files

__all__ = ["Catalog", "Snapshot", "Views"]

T = TypeVar("T")
V = TypeVar("V")

_MAX_KBS = 64  # catalogues kept per kind and services (least recently used out)


@dataclass
class _State(Generic[T]):
    """One KB's folder as of `version`: path -> (sha256, record or None when the file is no record)."""

    version: str | None = None
    built: bool = False
    entries: dict[str, tuple[str, T | None]] = field(default_factory=dict)
    words: dict[str, frozenset[str]] = field(default_factory=dict)  # path -> its record's terms
    postings: dict[str, set[str]] = field(default_factory=dict)  # term -> paths of records with it
    snapshot: Snapshot[T] | None = None  # made lazily after a change
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """The records of a folder at `version` (None: an empty KB) and their files' sha256.

    Both mappings are fresh for each version and never change afterwards: do not mutate them.
    """

    version: str | None
    records: Mapping[str, T]
    sha256s: Mapping[str, str]


class Catalog(Generic[T]):
    """The catalogue of one kind of record: files under `prefix` parsed by `parse(path, text)`
    (None: a file that is not such a record), per KB of each services, optionally with `terms`."""

    def __init__(
        self,
        prefix: str,
        parse: Callable[[str, str], T | None],
        terms: Callable[[T], Iterable[str]] | None = None,
    ) -> None:
        self.prefix = prefix
        self._parse = parse
        self._terms = terms
        self._states: dict[int, OrderedDict[str, _State[T]]] = {}
        self._lock = threading.Lock()

    # -- which state -------------------------------------------------------------------------------
    def _state(self, call: DialectCall, slug: str) -> _State[T]:
        key = id(call.services)
        with self._lock:
            kbs = self._states.get(key)
            if kbs is None:
                kbs = self._states[key] = OrderedDict()
                # Services closed and collected: forget them before their id can be reused.
                weakref.finalize(call.services, self._forget, key)
            state = kbs.get(slug)
            if state is None:
                state = kbs[slug] = _State()
                while len(kbs) > _MAX_KBS:
                    kbs.popitem(last=False)
            kbs.move_to_end(slug)
            return state

    def _forget(self, key: int) -> None:
        with self._lock:
            self._states.pop(key, None)

    # -- reading -----------------------------------------------------------------------------------
    def snapshot(self, call: DialectCall, slug: str) -> Snapshot[T]:
        """The records at the head of `slug`, which the caller may read. Raises NotFound."""
        state = self._current(call, slug)
        with state.lock:
            return self._snapshot(state)

    def similar(
        self,
        call: DialectCall,
        slug: str,
        words: Iterable[str],
        threshold: float,
        allow: Callable[[T], bool] | None = None,
    ) -> list[tuple[float, T]]:
        """(Jaccard, record) of the records at the head whose terms overlap `words` by at least
        `threshold` (in (0, 1]) and that `allow` accepts, best first, ties by path.

        Exact, yet only a few records are scored: a record overlapping enough must hold at least
        `need` of the words, so it holds one of any len(words) - need + 1 of them; the rarest are
        probed in the inverted index. Raises NotFound.
        """
        x = frozenset(words)
        if not x or threshold <= 0:
            return []
        need = max(1, math.ceil(threshold * len(x) - 1e-9))  # |x & y| >= threshold * |x | y| >= ...
        state = self._current(call, slug)
        with state.lock:
            probe = sorted(x, key=lambda w: len(state.postings.get(w, ())))[: len(x) - need + 1]
            candidates: set[str] = set()
            for word in probe:
                candidates.update(state.postings.get(word, ()))
            out: list[tuple[float, str, T]] = []
            for path in candidates:
                record = state.entries[path][1]
                if record is None or (allow is not None and not allow(record)):
                    continue
                y = state.words[path]
                score = len(x & y) / len(x | y)
                if score >= threshold:
                    out.append((score, path, record))
        out.sort(key=lambda item: (-item[0], item[1]))
        return [(score, record) for score, _path, record in out]

    def _current(self, call: DialectCall, slug: str) -> _State[T]:
        """The state of `slug`, brought to its head. Raises NotFound."""
        head = files.visible_version(call.services, call.caller, slug)
        state = self._state(call, slug)
        with state.lock:
            if not state.built or state.version != head:
                self._catch_up(call, slug, state, head)
        return state

    def _snapshot(self, state: _State[T]) -> Snapshot[T]:
        if state.snapshot is None:
            records = {p: r for p, (_s, r) in state.entries.items() if r is not None}
            state.snapshot = Snapshot(state.version, records, {p: state.entries[p][0] for p in records})
        return state.snapshot

    def _catch_up(self, call: DialectCall, slug: str, state: _State[T], head: str | None) -> None:
        if head is None:
            self._clear(state)
        elif state.built and state.version is not None:
            paths = files.changed_paths(call.services, slug, state.version, head, self.prefix)
            if paths is None:
                self._rebuild(call, slug, state, head)
            else:
                for path in paths:
                    self._reread(call, slug, state, path, head)
        else:
            self._rebuild(call, slug, state, head)
        state.version, state.built, state.snapshot = head, True, None

    def _clear(self, state: _State[T]) -> None:
        state.entries, state.words, state.postings, state.snapshot = {}, {}, {}, None

    def _rebuild(self, call: DialectCall, slug: str, state: _State[T], head: str) -> None:
        old = state.entries
        self._clear(state)
        for path, sha256, text in files.texts_at(call.services, slug, head, self.prefix):
            known = old.get(path)
            if known is not None and known[0] == sha256:
                self._put(state, path, sha256, known[1])
            else:
                self._put(state, path, sha256, None if text is None else self._parse(path, text))

    def _reread(self, call: DialectCall, slug: str, state: _State[T], path: str, version: str) -> None:
        try:
            found = files.read_at(call.services, slug, path, version)
        except NotFound:
            self._drop(state, path)
            return
        except InvalidRequest:  # not UTF-8 text: a file someone put there, not a record
            self._put(state, path, "", None)
            return
        self._put(state, path, found.sha256, self._parse(path, found.content))

    def _put(self, state: _State[T], path: str, sha256: str, record: T | None) -> None:
        self._drop(state, path)
        state.entries[path] = (sha256, record)
        if record is not None and self._terms is not None:
            words = frozenset(self._terms(record))
            state.words[path] = words
            for word in words:
                state.postings.setdefault(word, set()).add(path)

    def _drop(self, state: _State[T], path: str) -> None:
        state.snapshot = None
        if state.entries.pop(path, None) is None:
            return
        for word in state.words.pop(path, frozenset()):
            paths = state.postings.get(word)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del state.postings[word]

    # -- after a write of our own ------------------------------------------------------------------
    def note(self, call: DialectCall, slug: str, written: Written, texts: Mapping[str, str | None]) -> None:
        """Move the catalogue past a write of this dialect without a diff: when it reflected the
        write's parent, the write's new version differs from it by exactly `texts` (path -> the text
        written, None: deleted). Otherwise nothing happens (the next snapshot diffs)."""
        if written.version is None or written.files is None:
            return  # a proposal: main did not move
        state = self._state(call, slug)
        with state.lock:
            if not state.built or state.version != written.parent:
                return
            if set(written.files) != set(texts):
                return  # not the write described: let the next snapshot diff
            for path, text in texts.items():
                sha256 = written.files[path]
                if not path.startswith(self.prefix):
                    continue
                if text is None or sha256 is None:
                    self._drop(state, path)
                else:
                    self._put(state, path, sha256, self._parse(path, text))
            state.version, state.snapshot = written.version, None


class Views(Generic[T, V]):
    """Values derived from a snapshot (the records passing a search's filters, say), kept for the
    next call with the same key until the KB changes: a snapshot is made anew for each version and
    never changes, so a value made from it stays right as long as it is asked for that snapshot.
    The last `size` are kept."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._items: OrderedDict[tuple[int, Hashable], tuple[Snapshot[T], V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, snapshot: Snapshot[T], key: Hashable, make: Callable[[], V]) -> V:
        """The value for `snapshot` and `key`, made by `make()` unless kept."""
        ident = (id(snapshot), key)
        with self._lock:
            found = self._items.get(ident)
            if found is not None and found[0] is snapshot:  # not another snapshot at a reused id
                self._items.move_to_end(ident)
                return found[1]
        value = make()
        with self._lock:
            self._items[ident] = (snapshot, value)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value
