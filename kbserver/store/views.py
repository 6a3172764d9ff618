"""The files of one version, read lazily by path through the repository's object cache."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from typing import Protocol

from kbserver.store.objects import ObjectCache

__all__ = ["TreeView"]


class Objects(Protocol):
    """What a view reads through: the repository's object cache and its blobs (a `KBRepo`)."""

    get: ObjectCache

    def blob(self, blob_id: str) -> bytes: ...


class TreeView:
    """The files of one version (or of a tree being built), read lazily by path."""

    def __init__(self, repo: Objects, tree_id: bytes | None, version: str | None) -> None:
        self._repo = repo
        self.tree_id = tree_id
        self.version = version

    def entry(self, path: str) -> tuple[int, bytes] | None:
        """(git mode, object id) of whatever is at `path` (a file or a folder), or None: for the writer."""
        if self.tree_id is None:
            return None
        mode, sha = stat.S_IFDIR, self.tree_id
        for name in path.encode().split(b"/"):
            if not name:
                continue
            if not stat.S_ISDIR(mode):  # a file where a folder was expected
                return None
            found = self._repo.get.tree(sha).get(name)
            if found is None:
                return None
            mode, sha = found
        return mode, sha

    def read(self, path: str) -> bytes | None:
        """The bytes of the file at `path`, or None when there is no file there."""
        entry = self.entry(path)
        if entry is None or not stat.S_ISREG(entry[0]):
            return None
        return self._repo.blob(entry[1].decode())

    def blob_id(self, path: str) -> str | None:
        entry = self.entry(path)
        if entry is None or not stat.S_ISREG(entry[0]):
            return None
        return entry[1].decode()

    def is_dir(self, path: str) -> bool:
        entry = self.entry(path)
        return entry is not None and stat.S_ISDIR(entry[0])

    def case_twins(self, folder: str, name: str) -> list[str]:
        """The names directly in `folder` that equal `name` but for case (or Unicode form), `name`
        itself included when it is there; [] when `folder` is no folder. Kept per tree and carried
        along by the writer, so a write to a folder of 10,000 files does not fold 10,000 names."""
        if self.tree_id is None:
            return []
        tree_id: bytes = self.tree_id
        if folder:
            entry = self.entry(folder)
            if entry is None or not stat.S_ISDIR(entry[0]):
                return []
            tree_id = entry[1]
        return self._repo.get.tree(tree_id).case_twins(name)

    def walk(self, prefix: str = "") -> Iterator[tuple[str, bytes]]:
        """(path, blob id) of every file under `prefix` (a folder or a path start), in path order."""
        if self.tree_id is None:
            return
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start: bytes | None = self.tree_id
        if folder:
            entry = self.entry(folder)
            start = entry[1] if entry and stat.S_ISDIR(entry[0]) else None
        if start is None:
            return
        base = folder + "/" if folder else ""
        for path, sha in self._walk_tree(start, base):
            if path.startswith(prefix):
                yield path, sha

    def _walk_tree(self, tree_id: bytes, base: str) -> Iterator[tuple[str, bytes]]:
        tree = self._repo.get.tree(tree_id)
        # Tree order sorts folders as if they ended in "/", so sort by full path to stay in path order.
        entries = sorted(tree, key=lambda e: e[0])
        for name, mode, sha in entries:
            path = base + name.decode("utf-8", "surrogateescape")
            if stat.S_ISDIR(mode):
                yield from self._walk_tree(sha, path + "/")
            elif stat.S_ISREG(mode):
                yield path, sha
