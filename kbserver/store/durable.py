"""Making writes durable: fsync of exactly what a commit wrote (its files, then their folders).

As git's `core.fsync` does, never `syncfs`: syncfs flushes the whole file system, so one commit paid
for everyone else's dirty data there, and on shared storage (NFS, CephFS, EFS) "everyone" is every
node. The fsyncs of one flush are issued together from a few threads: a journaling file system
commits them as one transaction, so a batch of commits still pays for durability about once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["fsync_path", "sync_files"]

_THREADS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def fsync_path(path: str) -> None:
    """fsync one file or folder."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_present(path: str) -> None:
    try:
        fsync_path(path)
    except FileNotFoundError:  # a loose object that a repack packed meanwhile (made durable there)
        pass


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="kbserver-fsync")
        return _pool


def _all(paths: list[str]) -> None:
    """fsync `paths` at once (one after another when there are only one or two)."""
    if len(paths) <= 2:
        for path in paths:
            _fsync_present(path)
        return
    for future in [_executor().submit(_fsync_present, path) for path in paths]:
        future.result()  # re-raises an I/O error


def sync_files(anchor: str, paths: Iterable[str], nameless: Iterable[str] = ()) -> None:
    """Make `paths` (files under the repository `anchor`) and their folders durable.

    The files first, then each folder holding one, and for an object's `objects/xx` folder, which
    the commit may have created, `objects` too: a new name is durable once its folder is. The files
    `nameless` are flushed in the first round too, but not their folders: a lock file that is
    renamed next needs its bytes durable, not its name (its new name's folder is flushed after
    the rename).
    """
    files = list(dict.fromkeys(paths))
    _all([*files, *nameless])
    folders: dict[str, None] = {}
    objects = os.path.join(anchor, "objects")
    for path in files:
        folder = os.path.dirname(path)
        folders[folder] = None
        if os.path.dirname(folder) == objects:
            folders[objects] = None
    _all([f for f in folders if os.path.isdir(f)])
