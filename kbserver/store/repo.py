"""Reads of one bare KB repository: files at a version, listings, history of a path, diffs.

Raw object reads and their cache live in store.objects, a version's files in store.views, tree
diffs in store.diffs; this module ties them to one repository and to its main line.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import overload

from dulwich.object_store import DiskObjectStore
from dulwich.objects import Commit
from dulwich.refs import Ref
from dulwich.repo import Repo

from kbserver.core.errors import InvalidRequest, NotFound
from kbserver.core.model import utc_iso
from kbserver.store import diffs
from kbserver.store.diffs import Change
from kbserver.store.objects import ObjectCache, configured_level, read_raw
from kbserver.store.views import TreeView

__all__ = ["MAIN", "Change", "CommitInfo", "KBRepo", "TreeView"]

MAIN = Ref(b"refs/heads/main")
_DIGESTS = 20_000
_CHANGES_BYTES = 2 * 1024 * 1024  # the per-version changes kept (see version_changes)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_PREFIX = re.compile(r"^[0-9a-f]{7,40}$")
_TRAILER = re.compile(r"^(Kb-[A-Za-z]+): (.*)$")


@dataclass(frozen=True)
class CommitInfo:
    version: str
    parent: str | None
    author: str
    message: str
    time: str
    trailers: dict[str, str]
    seconds: int  # `time` as a Unix time


class KBRepo:
    """One KB's bare repository. Thread-safe for reads; writes go through `writer.Writer`."""

    main_step = 100  # how many new commits of main a version check walks at once (see on_main)

    def __init__(self, path: str, *, cache_bytes: int = 8 * 1024 * 1024) -> None:
        self.path = path
        self.git = Repo(path)
        self.get = ObjectCache(self.git, cache_bytes)
        # zlib levels of the loose objects we write: the repository's core.looseCompression or
        # core.compression when set; else C git's default for loose objects, 1 (cheaper than
        # dulwich's default, zlib's 6), and none for a big tree (see objects.BIG_TREE).
        configured = configured_level(self.git)
        self.loose_level = 1 if configured is None else configured
        self.big_tree_level = 0 if configured is None else configured
        self._digests: OrderedDict[bytes, tuple[int, str]] = OrderedDict()
        self._counts: dict[str, int] = {}
        # version -> (what it changed against its first parent, the bytes that costs); see version_changes
        self._changes: OrderedDict[str, tuple[tuple[Change, ...], int]] = OrderedDict()
        self._changes_bytes = 0
        self._changes_lock = threading.Lock()
        # Versions on main known so far (20-byte ids): the head and its first parents down to
        # `_main_next`; see on_main.
        self._main: set[bytes] = set()
        self._main_tip: str | None = None
        self._main_next: bytes | None = None  # below the known range of main (None: all known)
        self._main_lock = threading.Lock()

    def weight(self) -> int:
        """Roughly the bytes this open repository holds: its caches and dulwich's own state."""
        caches = 200 * len(self._digests) + 100 * len(self._counts) + 90 * len(self._main)
        return 256 * 1024 + self.get.bytes + caches + self._changes_bytes

    def close(self) -> None:
        self.git.close()

    # -- refs -----------------------------------------------------------------------------------
    def head(self) -> str | None:
        """The current version of main, read from disk every time (other processes move it)."""
        try:
            return self.git.refs[MAIN].decode()
        except KeyError:
            return None

    @overload
    def resolve(self, version: str) -> str: ...
    @overload
    def resolve(self, version: None) -> str | None: ...
    def resolve(self, version: str | None) -> str | None:
        """`version` checked to be a version on main, or the head when None (None: no version yet).

        The one check that a version named in a request is on main: every service resolves here.

        Raises InvalidRequest for a malformed id and NotFound for any other commit (a pending
        proposal's included) or an unknown id.
        """
        if version is None:
            return self.head()
        if not isinstance(version, str) or not _HEX40.match(version):
            raise InvalidRequest("version must be a 40-hex commit id", version=version)
        try:
            obj = self.get(version.encode())
        except KeyError:
            obj = None
        if not isinstance(obj, Commit) or not self.on_main(version):
            raise NotFound(
                f"version {version} is not a version of this KB; list the versions to see them",
                version=version,
            )
        return version

    def expand(self, prefix: str) -> str:
        """The version on main whose id starts with `prefix` (7 to 40 lowercase hex digits).

        Raises InvalidRequest for a malformed or ambiguous prefix, NotFound when no version matches.
        """
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise InvalidRequest("a version is 7 to 40 hex digits of its id", version=prefix)
        if len(prefix) == 40:
            return self.resolve(prefix)
        found = [
            sha.decode()
            for sha in self.git.object_store.iter_prefix(prefix.encode())
            if isinstance(self.get(sha), Commit) and self.on_main(sha.decode())
        ]
        if len(found) > 1:
            raise InvalidRequest(
                f"{prefix} starts {len(found)} versions; give more of its digits", version=prefix
            )
        if not found:
            raise NotFound(
                f"no version of this KB starts with {prefix}; list the versions to see them", version=prefix
            )
        return found[0]

    def on_main(self, version: str) -> bool:
        """Whether `version` (a commit id) is main's head or one of its first parents.

        Cached: the known part of main is the range from the head down to `_main_next` (the next
        commit to look at, None once the first version is reached). A new head walks only the new
        commits; a version below the range walks down only to its own parent, since on a one-line
        history a commit is on main exactly when main's child of its parent is that commit.
        """
        with self._main_lock:
            head = self.head()  # read under the lock, so no thread applies an older head after a newer
            if head is None:
                return False
            if head != self._main_tip:
                self._grow_main(head)
            key = bytes.fromhex(version)
            if key in self._main or self._main_next is None:
                return key in self._main
            commit = self.get(key)
            assert isinstance(commit, Commit)
            stop = commit.parents[0] if commit.parents else None  # None: walk to the first version
            while self._main_next is not None and (
                stop is None or bytes.fromhex(stop.decode()) not in self._main
            ):
                self._main.add(bytes.fromhex(self._main_next.decode()))
                below = self.get(self._main_next)
                assert isinstance(below, Commit)
                self._main_next = below.parents[0] if below.parents else None
            return key in self._main

    def _grow_main(self, head: str) -> None:
        """Make the known range start at `head`: add the commits main gained, or start again when
        main went back or was rewritten (C git by hand)."""
        rewound = bytes.fromhex(head) in self._main
        new: set[bytes] = set()
        sha: bytes | None = head.encode()
        while sha is not None and not rewound:
            key = bytes.fromhex(sha.decode())
            if key in self._main:
                self._main |= new
                self._main_tip = head
                return
            new.add(key)
            commit = self.get(sha)
            assert isinstance(commit, Commit)
            sha = commit.parents[0] if commit.parents else None
            if len(new) >= self.main_step:  # far from what is known: keep the range contiguous, walk lazily
                break
        self._main = set() if rewound else new
        self._main_next = head.encode() if rewound else sha
        self._main_tip = head

    def view(self, version: str | None) -> TreeView:
        """The files at `version` (a resolved commit id) or an empty view when None."""
        if version is None:
            return TreeView(self, None, None)
        commit = self.get(version.encode())
        assert isinstance(commit, Commit)
        return TreeView(self, commit.tree, version)

    def tree_view(self, tree_id: bytes, version: str | None) -> TreeView:
        return TreeView(self, tree_id, version)

    def file_count(self, version: str | None) -> int:
        """How many files `version` has; cached, since a version never changes and counting walks
        every file."""
        if version is None:
            return 0
        count = self._counts.get(version)
        if count is None:
            if len(self._counts) >= 1000:  # keep it bounded; heads move on
                self._counts.clear()
            count = self._counts[version] = sum(1 for _ in self.view(version).walk())
        return count

    # -- blobs ------------------------------------------------------------------------------------
    def blob(self, blob_id: str) -> bytes:
        """The bytes of a blob. Raises KeyError for an unknown id."""
        return read_raw(self.git.object_store, blob_id.encode())[1]

    def drop_deleted_packs(self) -> None:
        """Close the packs a repack deleted (and open its new ones), so their disk space and file
        descriptors are freed now rather than at the next miss."""
        store = self.git.object_store
        if isinstance(store, DiskObjectStore):
            store.packs  # noqa: B018 (the property rescans objects/pack and closes vanished packs)

    def digest(self, blob_id: bytes) -> tuple[int, str]:
        """(size, sha256) of a blob; the last 20,000 are cached (a blob id names its bytes)."""
        known = self._digests.get(blob_id)
        if known is None:
            data = self.blob(blob_id.decode())
            known = (len(data), hashlib.sha256(data).hexdigest())
            self._digests[blob_id] = known
            if len(self._digests) > _DIGESTS:
                with contextlib.suppress(KeyError):  # another thread may have trimmed it first
                    self._digests.popitem(last=False)
        return known

    # -- history ----------------------------------------------------------------------------------
    def commit_info(self, version: str) -> CommitInfo:
        commit = self.get(version.encode())
        assert isinstance(commit, Commit)
        message = commit.message.decode("utf-8", "replace")
        trailers: dict[str, str] = {}
        for line in message.splitlines():
            m = _TRAILER.match(line)
            if m:
                trailers[m.group(1)] = m.group(2).strip()
        when = utc_iso(commit.commit_time)
        return CommitInfo(
            version=version,
            parent=commit.parents[0].decode() if commit.parents else None,
            author=commit.author.decode("utf-8", "replace").split(" <", 1)[0],
            message=message,
            time=when,
            trailers=trailers,
            seconds=int(commit.commit_time),
        )

    def first_parents(self, start: str) -> Iterator[str]:
        """Versions from `start` back to the first one, following first parents."""
        sha: bytes | None = start.encode()
        while sha is not None:
            commit = self.get(sha)
            assert isinstance(commit, Commit)
            yield sha.decode()
            sha = commit.parents[0] if commit.parents else None

    def reaches(self, start: str, version: str) -> bool:
        """True when `version` is `start` or one of its first-parent ancestors (both resolved ids).

        Stops at the first ancestor older than `version`, so the walk is as long as the distance.
        """
        if start == version:
            return True
        target = self.get(version.encode())
        assert isinstance(target, Commit)
        sha: bytes | None = start.encode()
        want = version.encode()
        while sha is not None:
            if sha == want:
                return True
            commit = self.get(sha)
            assert isinstance(commit, Commit)
            if commit.commit_time < target.commit_time:
                return False
            sha = commit.parents[0] if commit.parents else None
        return False

    def path_history(self, start: str, path: str) -> Iterator[str]:
        """Versions that changed `path`, newest first (compares only the entry at `path`)."""
        previous: str | None = None
        previous_entry: bytes | None = None
        for version in self.first_parents(start):
            entry = self.view(version).blob_id(path)
            current = entry.encode() if entry else None
            if previous is not None and current != previous_entry:
                yield previous
            previous, previous_entry = version, current
        if previous is not None and previous_entry is not None:
            yield previous

    def path_history_within(self, start: str, path: str, within: int) -> tuple[list[str], str | None]:
        """The versions among the `within` newest from `start` that changed `path`, newest first, and
        the version where the look stopped (None: it reached the first version). A file's history
        otherwise walks all of main back to its creation, reading each version's folder on the way."""
        out: list[str] = []
        previous: str | None = None
        previous_entry: str | None = None
        for n, version in enumerate(self.first_parents(start)):
            entry = self.view(version).blob_id(path)
            if previous is not None and entry != previous_entry:
                out.append(previous)
            if n == within:
                return out, version  # not judged yet: a next look starts there
            previous, previous_entry = version, entry
        if previous is not None and previous_entry is not None:
            out.append(previous)
        return out, None

    def version_changes(self, version: str) -> list[Change]:
        """What `version` changed against its first parent (files only, sorted by path).

        Cached (the newest used, up to _CHANGES_BYTES): a version never changes, and the review, the
        history and the week pages ask for the same versions' paths again and again.
        """
        with self._changes_lock:
            kept = self._changes.get(version)
            if kept is not None:
                self._changes.move_to_end(version)
                return list(kept[0])
        commit = self.get(version.encode())
        assert isinstance(commit, Commit)
        parent = commit.parents[0].decode() if commit.parents else None
        found = tuple(self.changes(parent, version))
        cost = 150 + sum(300 + len(c.path) for c in found)
        with self._changes_lock:
            old = self._changes.pop(version, None)
            self._changes_bytes += cost - (old[1] if old else 0)
            self._changes[version] = (found, cost)
            while self._changes_bytes > _CHANGES_BYTES and len(self._changes) > 1:
                self._changes_bytes -= self._changes.popitem(last=False)[1][1]
        return list(found)

    def changes(self, old: str | None, new: str) -> list[Change]:
        """Paths that differ between two versions (files only), sorted by path."""
        return self.tree_changes(self.view(old).tree_id if old else None, self.view(new).tree_id)

    def tree_changes(self, old_tree: bytes | None, new_tree: bytes | None) -> list[Change]:
        """Paths that differ between two trees (files only), sorted by path (see diffs.tree_changes)."""
        return diffs.tree_changes(self.get.tree, old_tree, new_tree)

    def patch(self, change: Change) -> str:
        """The unified diff of one change, with git's a/ and b/ labels."""
        old = self.blob(change.old_blob) if change.old_blob else None
        new = self.blob(change.new_blob) if change.new_blob else None
        return diffs.text_patch(change.path, old, new)

    text_patch = staticmethod(diffs.text_patch)
