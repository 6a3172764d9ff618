"""Reading git objects: raw reads that survive a racing repack, and a bounded cache of parsed ones."""

from __future__ import annotations

import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from dulwich.errors import NotTreeError
from dulwich.object_store import BaseObjectStore, DiskObjectStore
from dulwich.objects import Commit, ObjectID, ShaFile, Tree
from dulwich.repo import Repo

from kbserver.store.trees import TreeTable

__all__ = ["BIG_TREE", "ObjectCache", "configured_level", "read_raw"]


def _cost(obj: ShaFile | TreeTable) -> int:
    """Roughly what a parsed commit or a tree table holds in memory."""
    return obj.weight() if isinstance(obj, TreeTable) else 1500


_READ_ATTEMPTS = 3
_T = TypeVar("_T")


def _retrying(read: Callable[[], _T]) -> _T:
    """`read()`, looked again when a repack raced with it.

    A repack beside us can pack an object between dulwich's look in the packs and its look in the
    loose objects (a KeyError for an object that exists), or close a pack another thread is
    reading (ValueError: the pack's mapping is closed). Like C git, look again: dulwich rescans
    the pack folder when its known packs miss. An unknown id stays a KeyError.
    """
    for attempt in range(_READ_ATTEMPTS):
        try:
            return read()
        except (KeyError, ValueError, BufferError):
            if attempt == _READ_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


_TYPE_NUMBERS = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}


def _read_loose(store: DiskObjectStore, sha: bytes) -> tuple[int, bytes] | None:
    """The loose object `sha` read as C git reads it (inflate, strip the header), or None when it is
    not loose. dulwich parses a loose object into a Python object and serialises it again, and only
    after missing it in every pack, which rescans the pack folder each time (TECH-NOTES §6.4)."""
    hexsha = sha.decode("ascii") if len(sha) == 40 else sha.hex()
    try:
        with open(os.path.join(store.path, hexsha[:2], hexsha[2:]), "rb") as f:
            data = zlib.decompress(f.read())
    except (FileNotFoundError, zlib.error):  # packed (or pruned meanwhile), or damaged: dulwich decides
        return None
    header, _, body = data.partition(b"\0")
    type_name, _, size = header.partition(b" ")
    type_num = _TYPE_NUMBERS.get(type_name)
    if type_num is None or not size.isdigit() or int(size) != len(body):
        return None
    return type_num, body


def read_raw(store: BaseObjectStore, sha: bytes) -> tuple[int, bytes]:
    """(type number, bytes) of object `sha` (40 hex or 20 raw bytes). Raises KeyError when unknown."""
    if isinstance(store, DiskObjectStore):
        loose = _read_loose(store, sha)
        if loose is not None:
            return loose
    return _retrying(lambda: store.get_raw(ObjectID(sha)))


class ObjectCache:
    """An LRU of parsed commits and of trees (`TreeTable`s), immutable for a given id, of at most
    `max_bytes`."""

    def __init__(self, repo: Repo, max_bytes: int = 8 * 1024 * 1024) -> None:
        self._store = repo.object_store
        self._max_bytes = max_bytes
        self._items: OrderedDict[bytes, tuple[ShaFile | TreeTable, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0

    def _cached(self, sha: bytes) -> ShaFile | TreeTable | None:
        with self._lock:
            item = self._items.get(sha)
            if item is None:
                return None
            self._items.move_to_end(sha)
            return item[0]

    def __call__(self, sha: bytes) -> ShaFile:
        """The commit or blob `sha` (commits are kept). Raises KeyError for an unknown id."""
        obj = self._cached(sha)
        if isinstance(obj, ShaFile):
            return obj
        # a tree asked for as an object is parsed by dulwich, uncached
        type_num, raw = read_raw(self._store, sha)
        found = ShaFile.from_raw_string(
            type_num, raw, ObjectID(sha if len(sha) == 40 else sha.hex().encode())
        )
        if isinstance(found, Commit):
            self.remember(found)
        return found

    def tree(self, sha: bytes) -> TreeTable:
        """The tree `sha`. Raises KeyError for an unknown id and NotTreeError for another object."""
        obj = self._cached(sha)
        if isinstance(obj, TreeTable):
            return obj
        type_num, raw = read_raw(self._store, sha)
        if type_num != Tree.type_num:
            raise NotTreeError(sha)
        table = TreeTable.parse(raw, sha)
        self.remember(table)
        return table

    def remember(self, obj: ShaFile | TreeTable) -> None:
        """Keep `obj` (a commit, or a tree table; the caller must not mutate a commit afterwards)."""
        cost = _cost(obj)
        with self._lock:
            old = self._items.pop(obj.id, None)
            self.bytes += cost - (old[1] if old else 0)
            self._items[obj.id] = (obj, cost)
            while self.bytes > self._max_bytes and len(self._items) > 1:
                self.bytes -= self._items.popitem(last=False)[1][1]


BIG_TREE = 64 * 1024
"""Bytes from which a tree is stored uncompressed when the repository sets no compression level.

A big tree is mostly 20-byte ids that zlib barely shrinks, and compressing it cost more than the
rest of a commit (docs/performance.md, "Measurements behind the code"). A loose object is transient:
the writer's packer (store.packing) repacks loose objects, with deltas, once 1,000 commits or 64 MiB
of them were written."""


def configured_level(git: Repo) -> int | None:
    config = git.get_config()
    for name in (b"looseCompression", b"compression"):
        try:
            return int(config.get((b"core",), name))
        except KeyError:
            continue
        except ValueError:
            return None  # not a number: git would refuse it; keep our defaults
    return None
