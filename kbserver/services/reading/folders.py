"""The files of a version folder by folder (names in path order, content ids), kept per version.

The KB page shows each folder's first files and counts the rest: from scratch, a walk of every name
of the version. A version never changes, so the listing of one is kept, keyed only by immutable
things (the repository, the version id, who looks), and a newer version's listing is made from a
kept one of the same KB by the tree diff between the two (skipping equal folders by id), so the page
after a write does not walk the KB again. Being keyed by version ids, a listing is right on every
node whatever the others wrote. A KB's listings live in the services' pool, weighed by their names
and charged to the memory budget with its repository and index: kept beside the budget, they grew
with the number of KBs the admin looked at.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from kbserver.core.model import Caller
from kbserver.core.pool import LeasePool
from kbserver.services.parts import Repository
from kbserver.services.reading.privacy import hidden

__all__ = ["KEPT_PER_KB", "Listing", "listing"]

KEPT_PER_KB = 4  # listings kept of one KB (versions and viewers), the least recent go first
_NAME_BYTES = 200  # a kept name: its path, its content id, its slots in a dict and a list (~170)
_MAX_DIFF = 2_000  # changes from a kept listing past which a fresh walk is as cheap


@dataclass(frozen=True)
class Listing:
    """One version's files that a viewer may see: each folder ("" or "a/b/") to its files' paths
    in path order, and every path's content id (ASCII bytes, as `Files.walk` gives it)."""

    version: str | None
    folders: dict[str, list[str]]
    blobs: dict[str, bytes]


@dataclass
class _Kept:
    """One KB's kept listings by (viewer, version), the most recent last."""

    listings: OrderedDict[tuple[str, str], Listing] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    files: int = 0  # names in `listings`, read by the pool without the lock


def _new(_slug: str) -> _Kept:
    return _Kept()


def _forget(_kept: _Kept) -> None:
    """Nothing to close: the listings go with the last reference."""


def _weigh(kept: _Kept) -> int:
    return 1024 + _NAME_BYTES * kept.files


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


def listing(caller: Caller, repo: Repository, slug: str, version: str | None, pool: LeasePool) -> Listing:
    """The files of `version` (a resolved id, or None) of KB `slug`'s repository `repo` that
    `caller` may see, folder by folder; kept in `pool` under `slug`."""
    if version is None:
        return Listing(None, {}, {})
    viewer = "" if caller.is_human else caller.name  # what privacy.hidden depends on
    with pool.kind("listings", _new, _forget, _weigh).lease(slug) as kept:
        with kept.lock:
            found = kept.listings.get((viewer, version))
            if found is not None:
                kept.listings.move_to_end((viewer, version))
                return found
            base = next((v for (w, _), v in reversed(kept.listings.items()) if w == viewer), None)
        made = None
        if base is not None:
            try:
                made = _moved_on(caller, repo, base, version)
            except KeyError:  # the kept version is not in this repository (the KB was made anew)
                made = None
        if made is None:
            made = _walk(caller, repo, version)
        with kept.lock:
            if (viewer, version) not in kept.listings:
                kept.listings[(viewer, version)] = made
                kept.files += len(made.blobs)
            while len(kept.listings) > KEPT_PER_KB:
                kept.files -= len(kept.listings.popitem(last=False)[1].blobs)
    pool.trim()  # the KB's listings weigh more now
    return made
