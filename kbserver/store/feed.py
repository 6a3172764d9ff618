"""The data folder's feed: an append-only log every process writes new heads and sink progress to.

Writers (serve, `kbserver mcp`, import, the CLI) append `H slug version` after each new version;
the follower appends `C sink slug version` once a sink covers a version, a reader that finds
a sink damaged appends `D sink slug`, and a reader that starts waiting for a sink to cover a
version appends `W sink slug version` (the follower then applies it at once, without letting
commits settle into a batch first). Every process tails the
file (one stat per poll), so no process has to scan every KB folder to learn of another's commits.
Lines are short single `write`s on an `O_APPEND` descriptor, so concurrent appends never
interleave. Past `max_bytes` a writer renames the log to `feed.log.1` under `feed.lock`; a reader
that sees the rename finishes the old file and reports `rotated`, after which it should reconcile
everything (heads are read from the repositories; the feed only says where to look).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kbserver.store.watch import FolderWatch

__all__ = ["Covered", "Damaged", "Feed", "FeedReader", "Head", "Record", "Wanted"]

_MAX_BYTES = 4 * 1024 * 1024
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
_HEX40 = re.compile(r"[0-9a-f]{40}\Z")


@dataclass(frozen=True)
class Head:
    """`slug` has the new head `version`."""

    slug: str
    version: str


@dataclass(frozen=True)
class Covered:
    """Sink `sink` covers `version` of `slug`."""

    sink: str
    slug: str
    version: str


@dataclass(frozen=True)
class Damaged:
    """A reader found sink `sink`'s storage of `slug` damaged: the follower should rebuild it."""

    sink: str
    slug: str


@dataclass(frozen=True)
class Wanted:
    """A reader waits for sink `sink` to cover `version` of `slug`: the follower should not hold it back."""

    sink: str
    slug: str
    version: str


Record = Head | Covered | Damaged | Wanted


def _parse(line: bytes) -> Record | None:
    parts = line.decode("ascii", "replace").split(" ")
    if len(parts) == 3 and parts[0] == "H" and _WORD.match(parts[1]) and _HEX40.match(parts[2]):
        return Head(parts[1], parts[2])
    if (
        len(parts) == 4
        and parts[0] in ("C", "W")
        and _WORD.match(parts[1])
        and _WORD.match(parts[2])
        and _HEX40.match(parts[3])
    ):
        return (Covered if parts[0] == "C" else Wanted)(parts[1], parts[2], parts[3])
    if len(parts) == 3 and parts[0] == "D" and _WORD.match(parts[1]) and _WORD.match(parts[2]):
        return Damaged(parts[1], parts[2])
    return None  # a torn or foreign line: the feed is a hint, the repositories are the truth


class Feed:
    """`{folder}/feed.log`; cheap to build, holds no open files between calls."""

    def __init__(self, folder: Path, *, max_bytes: int = _MAX_BYTES) -> None:
        self.path = folder / "feed.log"
        self._lock = folder / "feed.lock"
        self._max_bytes = max_bytes

    def head(self, slug: str, version: str) -> None:
        self._append(f"H {slug} {version}\n")

    def covered(self, sink: str, slug: str, version: str) -> None:
        self._append(f"C {sink} {slug} {version}\n")

    def damaged(self, sink: str, slug: str) -> None:
        self._append(f"D {sink} {slug}\n")

    def wanted(self, sink: str, slug: str, version: str) -> None:
        self._append(f"W {sink} {slug} {version}\n")

    def _append(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("ascii"))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > self._max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        fd = os.open(self._lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.path).st_size > self._max_bytes:  # not already rotated by another writer
                    os.replace(self.path, self.path.with_name("feed.log.1"))
        finally:
            os.close(fd)  # releases the flock

    def reader(self) -> FeedReader:
        """A reader that starts at the current end of the log (earlier lines are history)."""
        return FeedReader(self.path)

    def earlier(self) -> list[Record]:
        """Every record in the current log (at most `max_bytes`): a new follower learns from the `W`
        lines which KBs were used lately (kbserver.services.following.serving)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return [r for r in map(_parse, data.split(b"\n")[:-1]) if r is not None]


class FeedReader:
    """Tails the feed: `poll()` returns the records appended since the last call."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._ino: int | None = None
        self._rest = b""
        self._open(at_end=True)

    def _open(self, *, at_end: bool) -> None:
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            self._fd = self._ino = None
            return
        self._fd, self._ino = fd, os.fstat(fd).st_ino
        if at_end:
            os.lseek(fd, 0, os.SEEK_END)

    def _drain(self) -> list[Record]:
        assert self._fd is not None
        chunks = [self._rest]
        while chunk := os.read(self._fd, 1 << 16):
            chunks.append(chunk)
        data = b"".join(chunks)
        *lines, self._rest = data.split(b"\n")
        return [r for r in map(_parse, lines) if r is not None]

    def poll(self) -> tuple[list[Record], bool]:
        """(new records, rotated): `rotated` means lines may have been missed; reconcile everything."""
        try:
            ino: int | None = os.stat(self._path).st_ino
        except FileNotFoundError:
            ino = None
        records: list[Record] = []
        rotated = False
        if self._fd is not None:
            records = self._drain()
            if ino == self._ino:
                return records, False
            os.close(self._fd)
            self._fd, self._rest, rotated = None, b"", True
        if ino is not None:
            self._open(at_end=False)  # a new log: every line in it is new to us
            if self._fd is not None:
                records += self._drain()
            rotated = True
        return records, rotated

    def watch(self) -> FolderWatch | None:
        """A watch that wakes when the log is appended to, created or renamed by any process of
        this machine (None where the OS cannot tell: then poll)."""
        return FolderWatch.open(self._path.parent, [self._path.name])

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
