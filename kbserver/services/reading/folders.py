"""The files of a version folder by folder (names in path order, content ids), kept per version.

The KB page shows each folder's first files and counts the rest: from scratch, a walk of every name
of the version. A version never changes, so the listing of one is kept, keyed only by immutable
things (the repository, the version id, who looks), and a newer version's listing is made from a
kept one of the same KB by the tree diff between the two (skipping equal folders by id), so the page
after a write does not walk the KB again. Being keyed by version ids, a listing is right on every
node whatever the others wrote.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass

from kbserver.core.model import Caller
from kbserver.services.parts import Repository
from kbserver.services.reading.privacy import hidden

__all__ = ["MAX_FILES", "Listing", "listing"]

MAX_FILES = 100_000  # names kept across all listings (~200 bytes each); the least recent go first
_MAX_DIFF = 2_000  # changes from a kept listing past which a fresh walk is as cheap


@dataclass(frozen=True)
class Listing:
    """One version's files that a viewer may see: each folder ("" or "a/b/") to its files' paths
    in path order, and every path's content id (ASCII bytes, as `Files.walk` gives it)."""

    version: str | None
    folders: dict[str, list[str]]
    blobs: dict[str, bytes]


_lock = threading.Lock()
_kept: OrderedDict[tuple[str, str, str], Listing] = OrderedDict()  # (repository, viewer, version)
_kept_files = 0


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[0] + "/" if "/" in path else ""


def _walk(caller: Caller, repo: Repository, version: str | None) -> Listing:
    folders: dict[str, list[str]] = {}
    blobs: dict[str, bytes] = {}
    for path, blob in repo.view(version).walk():
        if not hidden(caller, repo, path, blob):
            folders.setdefault(_folder(path), []).append(path)
            blobs[path] = blob
    return Listing(version, folders, blobs)


def _moved_on(caller: Caller, repo: Repository, old: Listing, version: str) -> Listing | None:
    """`old` carried forward to `version` by the diff between the two; None when that is no cheaper."""
    assert old.version is not None
    changes = repo.changes(old.version, version)
    if len(changes) > _MAX_DIFF:
        return None
    folders, blobs = dict(old.folders), dict(old.blobs)
    copied: set[str] = set()
    for ch in changes:
        folder = _folder(ch.path)
        if folder not in copied:  # the other folders' lists stay shared with `old` (never changed)
            folders[folder] = list(folders.get(folder, ()))
            copied.add(folder)
        names = folders[folder]
        if ch.path in blobs:
            del blobs[ch.path]
            del names[bisect.bisect_left(names, ch.path)]
        if ch.new_blob is not None and not hidden(caller, repo, ch.path, ch.new_blob):
            bisect.insort(names, ch.path)
            blobs[ch.path] = ch.new_blob.encode()
        if not names:
            del folders[folder]
    return Listing(version, folders, blobs)


def listing(caller: Caller, repo: Repository, where: str, version: str | None) -> Listing:
    """The files of `version` (a resolved id, or None) of the repository at `where` that `caller`
    may see, folder by folder."""
    global _kept_files
    if version is None:
        return Listing(None, {}, {})
    viewer = "" if caller.is_human else caller.name  # what privacy.hidden depends on
    with _lock:
        found = _kept.get((where, viewer, version))
        if found is not None:
            _kept.move_to_end((where, viewer, version))
            return found
        base = next((v for (s, w, _), v in reversed(_kept.items()) if (s, w) == (where, viewer)), None)
    made = None
    if base is not None:
        try:
            made = _moved_on(caller, repo, base, version)
        except KeyError:  # the kept version is not in this repository (the KB was made anew)
            made = None
    if made is None:
        made = _walk(caller, repo, version)
    with _lock:
        if (where, viewer, version) not in _kept:
            _kept[(where, viewer, version)] = made
            _kept_files += len(made.blobs)
        while _kept_files > MAX_FILES and len(_kept) > 1:
            _kept_files -= len(_kept.popitem(last=False)[1].blobs)
    return made
