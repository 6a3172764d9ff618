"""Tree objects kept as the bytes of their entries, so a commit that changes one file of a big
folder costs a binary search and a splice, not a parse and a rewrite of every entry.

git stores a folder as one tree object: entries `{mode} {name}\\0{20-byte id}`, sorted by name with
folders compared as if their name ended in "/". dulwich parses every entry into Python objects and
serialises them all again on each change.
A `TreeTable` keeps each entry's bytes as they are and makes the next version of a tree by
replacing a few entries in a copy of the list, which yields the same bytes (and id) as dulwich's
or C git's rewrite; tests/store/test_trees.py checks that against both.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import operator
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from kbserver.core.paths import case_key

__all__ = [
    "EMPTY",
    "FILE_MODE",
    "FOLDER_MODE",
    "TreeTable",
    "edit_tree",
    "entry_name",
    "put_loose",
    "write_loose",
]

FILE_MODE = 0o100644
FOLDER_MODE = 0o040000
_OBJECT_MODE = 0o444  # loose objects are read-only, as C git and dulwich write them
# One tree entry: an octal mode, a space, a name (no NUL), a NUL and a 20-byte id.
_ENTRY = re.compile(rb"[0-7]+ [^\0]*\0.{20}", re.DOTALL)
_MODE_NAME = re.compile(rb"([0-7]+) ([^\0]*)\0.{20}", re.DOTALL)


def _split(chunk: bytes) -> tuple[bytes, bytes]:
    """(mode, name) of one entry's bytes."""
    space = chunk.index(b" ")
    return chunk[:space], chunk[space + 1 : chunk.index(b"\0", space)]


def entry_name(chunk: bytes) -> bytes:
    """The name in one entry's bytes (an item of `TreeTable.chunks`)."""
    return _split(chunk)[1]


def _is_dir(mode: bytes) -> bool:
    return mode == b"40000" or (mode != b"100644" and stat.S_ISDIR(int(mode, 8)))


def _key(chunk: bytes) -> bytes:
    """git's sort key of an entry: its name, plus "/" for a folder."""
    mode, name = _split(chunk)
    return name + b"/" if _is_dir(mode) else name


def _entry(name: bytes, mode: int, sha: bytes) -> bytes:
    return f"{mode:04o}".encode("ascii") + b" " + name + b"\0" + bytes.fromhex(sha.decode("ascii"))


def _header(raw: bytes) -> bytes:
    return b"tree " + str(len(raw)).encode("ascii") + b"\0"


class TreeTable:
    """One tree: its entries' bytes in git order, and its id (40 hex digits, as ASCII bytes).

    Immutable once made: `edited` returns a new table. Lookups are binary searches (log n) of the
    entries' sort keys, kept beside the entries, since a commit looks a folder up many times.
    """

    __slots__ = ("_keys", "_odd", "chunks", "id", "size")

    def __init__(self, chunks: list[bytes], id: bytes, size: int, keys: list[bytes] | None = None) -> None:
        self.chunks = chunks
        self.id = id
        self.size = size  # bytes of the tree object's body
        self._keys = keys  # git's sort key of each entry (`_key`), in the same order; lazily
        # case_key -> the names whose case_key differs from the name itself (lazily; see case_twins)
        self._odd: dict[str, tuple[str, ...]] | None = None

    @classmethod
    def build(cls, chunks: list[bytes]) -> TreeTable:
        """The tree of these entries (already in git order); computes its id."""
        digest = hashlib.sha1(usedforsecurity=False)
        raw = b"".join(chunks)
        digest.update(_header(raw))
        digest.update(raw)
        return cls(chunks, digest.hexdigest().encode("ascii"), len(raw))

    @classmethod
    def parse(cls, raw: bytes, id: bytes) -> TreeTable:
        """The table of a tree object's body as stored. Raises ValueError when it is malformed.

        A tree whose entries are out of git order (C git's fsck calls that an error; no tool of ours
        makes one) is sorted, so lookups work; edits of it then yield a well-formed tree.
        """
        chunks: list[bytes] = _ENTRY.findall(raw)  # C speed: ~12x faster than the loop below
        if sum(map(len, chunks)) == len(raw):  # nothing but well-formed entries, back to back
            keys = [
                name + b"/" if mode != b"100644" and _is_dir(mode) else name
                for mode, name in _MODE_NAME.findall(raw)
            ]
            if not all(map(operator.lt, keys, keys[1:])):
                pairs = sorted(zip(keys, chunks, strict=True))
                keys, chunks = [k for k, _ in pairs], [c for _, c in pairs]
            return cls(chunks, id, len(raw), keys)
        return cls._parse_slowly(raw, id)

    @classmethod
    def _parse_slowly(cls, raw: bytes, id: bytes) -> TreeTable:
        """`parse` entry by entry: says where a malformed tree goes wrong."""
        chunks: list[bytes] = []
        pos, end, find = 0, len(raw), raw.index
        while pos < end:
            stop = find(b"\0", pos) + 21
            if stop > end or b" " not in raw[pos:stop]:
                raise ValueError(f"tree {id.decode()} is malformed at byte {pos}")
            chunks.append(raw[pos:stop])
            pos = stop
        keys = [_key(c) for c in chunks]
        if any(a >= b for a, b in itertools.pairwise(keys)):
            chunks = [c for _, c in sorted(zip(keys, chunks, strict=True))]
        return cls(chunks, id, len(raw))

    def raw(self) -> bytes:
        """The tree object's body, as git stores it (without the `tree N\\0` header)."""
        return b"".join(self.chunks)

    def __len__(self) -> int:
        return len(self.chunks)

    def __iter__(self) -> Iterator[tuple[bytes, int, bytes]]:
        """(name, mode, id) of every entry, in git order."""
        for chunk in self.chunks:
            mode, name = _split(chunk)
            yield name, int(mode, 8), chunk[-20:].hex().encode("ascii")

    def keys(self) -> list[bytes]:
        """git's sort key of every entry (its name, plus "/" for a folder), in git order."""
        if self._keys is None:
            self._keys = [_key(chunk) for chunk in self.chunks]
        return self._keys

    def _index(self, key: bytes) -> int | None:
        keys = self.keys()
        i = bisect.bisect_left(keys, key)
        return i if i < len(keys) and keys[i] == key else None

    def get(self, name: bytes) -> tuple[int, bytes] | None:
        """(mode, id) of the entry called `name` (a file's or a folder's), or None."""
        for key in (name, name + b"/"):
            i = self._index(key)
            if i is not None:
                chunk = self.chunks[i]
                return int(_split(chunk)[0], 8), chunk[-20:].hex().encode("ascii")
        return None

    def edited(self, changes: Mapping[bytes, tuple[int, bytes] | None]) -> TreeTable:
        """A new table with each name of `changes` set to (mode, id), or removed for None.

        Raises KeyError when a name to remove is not there.
        """
        chunks = list(self.chunks)  # copies of the pointers: a memmove, not a rewrite
        keys = list(self.keys())
        for name, value in changes.items():
            found = False
            for key in (name, name + b"/"):
                i = bisect.bisect_left(keys, key)
                if i < len(keys) and keys[i] == key:
                    del chunks[i], keys[i]
                    found = True
            if value is None:
                if not found:
                    raise KeyError(name)
                continue
            mode, sha = value
            chunk = _entry(name, mode, sha)
            key = _key(chunk)
            i = bisect.bisect_left(keys, key)
            chunks.insert(i, chunk)
            keys.insert(i, key)
        table = TreeTable.build(chunks)
        table._keys = keys
        if self._odd is not None:
            table._odd = _carry(self._odd, self, changes)
        return table

    def case_twins(self, name: str) -> list[str]:
        """The names in this tree that a case-insensitive file system takes for `name` (itself
        included when present): those whose `case_key` equals `name`'s."""
        key = case_key(name)
        if self._odd is None:
            odd: dict[str, tuple[str, ...]] = {}
            for _, entry_name in map(_split, self.chunks):
                text = entry_name.decode("utf-8", "surrogateescape")
                folded = case_key(text)
                if folded != text:
                    odd[folded] = (*odd.get(folded, ()), text)
            self._odd = odd
        twins = list(self._odd.get(key, ()))
        if case_key(key) == key and self.get(key.encode("utf-8", "surrogateescape")) is not None:
            twins.insert(0, key)  # a name that is its own case_key: found by lookup, not kept in _odd
        return twins

    def weight(self) -> int:
        """Roughly the bytes this table holds in memory."""
        odd = 0 if self._odd is None else 200 * len(self._odd)
        keys = 0 if self._keys is None else self.size + 13 * len(self._keys)  # a bytes object a name
        return 100 + self.size + 40 * len(self.chunks) + odd + keys


def _carry(
    odd: dict[str, tuple[str, ...]], old: TreeTable, changes: Mapping[bytes, tuple[int, bytes] | None]
) -> dict[str, tuple[str, ...]]:
    """`odd` of a table after `changes`, from the old table's."""
    new = dict(odd)
    for raw_name, value in changes.items():
        name = raw_name.decode("utf-8", "surrogateescape")
        folded = case_key(name)
        if folded == name:
            continue
        kept = tuple(n for n in new.get(folded, ()) if n != name)
        if value is not None:
            kept = (*kept, name)
        if kept:
            new[folded] = kept
        else:
            new.pop(folded, None)
    return new


EMPTY = TreeTable.build([])
"""The empty tree."""


def edit_tree(
    load: Callable[[bytes], TreeTable],
    base: bytes | None,
    changes: Sequence[tuple[bytes, bytes | None]],
) -> tuple[TreeTable, list[TreeTable]]:
    """The root tree after `changes` ((path, blob id) sets a file, (path, None) deletes a path) on
    the tree `base` (None: empty), and every tree made on the way, children first.

    Only the trees along changed paths are touched; a folder left empty disappears, as in git. Same
    result as dulwich's `commit_tree_changes`. Raises KeyError (a path to delete is not there) and
    ValueError (a path goes through a file).
    """
    made: list[TreeTable] = []
    root = _edit(load, load(base) if base is not None else EMPTY, changes, made)
    return root, made


def _edit(
    load: Callable[[bytes], TreeTable],
    table: TreeTable,
    changes: Sequence[tuple[bytes, bytes | None]],
    made: list[TreeTable],
) -> TreeTable:
    direct: dict[bytes, tuple[int, bytes] | None] = {}
    nested: dict[bytes, list[tuple[bytes, bytes | None]]] = {}
    for path, sha in changes:
        head, slash, rest = path.partition(b"/")
        if slash:
            nested.setdefault(head, []).append((rest, sha))
        else:
            direct[head] = None if sha is None else (FILE_MODE, sha)
    for name, inner in nested.items():  # after this folder's own changes, as dulwich does
        current = direct[name] if name in direct else table.get(name)
        if current is None:
            below = EMPTY
        elif stat.S_ISDIR(current[0]):
            below = load(current[1])
        else:
            raise ValueError(f"{name.decode('utf-8', 'replace')} is a file, not a folder")
        child = _edit(load, below, inner, made)
        # Emptied: it goes. (A new folder is never empty: deletes in it raise KeyError first.)
        direct[name] = (FOLDER_MODE, child.id) if len(child) else None
    new = table.edited(direct)
    made.append(new)
    return new


_FOLDER_RETRIES = 5
_T = TypeVar("_T")


def retry_emptied_folder(write: Callable[[], _T]) -> _T:
    """`write()` (which makes its `objects/xx` folder and writes into it), again when a repack's
    prune-packed removed the emptied folder between the mkdir and the open (C git retries the same way)."""
    for attempt in range(_FOLDER_RETRIES):
        try:
            return write()
        except FileNotFoundError:
            if attempt == _FOLDER_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def write_loose(objects: str, table: TreeTable, level: int) -> str:
    """Store `table` as a loose object under the `objects` folder (zlib `level`); returns its file."""

    def data() -> bytes:
        raw = table.raw()
        packer = zlib.compressobj(level)
        return packer.compress(_header(raw)) + packer.compress(raw) + packer.flush()

    return put_loose(objects, table.id.decode("ascii"), data)


def put_loose(objects: str, sha: str, data: Callable[[], bytes]) -> str:
    """Store the loose object `sha` (its compressed bytes from `data()`) under the `objects` folder,
    unless it is there: then only freshen it against age-based pruning, as dulwich does. Returns its file.

    Written into a temporary file of its own and renamed into place, as C git does, not through
    dulwich's `<name>.lock`: a writer killed mid-object leaves that lock behind, and the same write
    retried elsewhere makes the same object, so the name must not be one writer's to hold. Two
    writers of one object both succeed (same bytes). Not fsynced: the writer flushes a batch at once."""
    folder = os.path.join(objects, sha[:2])
    path = os.path.join(folder, sha[2:])
    try:
        os.utime(path, None)
        return path
    except FileNotFoundError:
        pass
    payload = data()

    def write() -> str:
        try:  # not os.makedirs(exist_ok=True): it raises when the folder is pruned after its EEXIST
            os.mkdir(folder)
        except FileExistsError:
            pass  # pruned before the open: FileNotFoundError there, and retried
        fd, tmp = _temporary(folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return path

    return retry_emptied_folder(write)


_names = itertools.count()


def _temporary(folder: str) -> tuple[int, str]:
    """A new read-only file in `folder`, open for writing: `tmp_obj_` (C git's prefix, so its gc
    removes one a crash left), then this process's id and a counter (cheaper than random names)."""
    while True:
        tmp = os.path.join(folder, f"tmp_obj_{os.getpid()}_{next(_names)}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _OBJECT_MODE), tmp
        except FileExistsError:
            continue  # left by an earlier process of the same id
