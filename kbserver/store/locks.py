"""A KB's cross-process writer lock (a flock on `kbserver.lock`, bounded) and its ref lock files."""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kbserver.core.errors import Busy
from kbserver.store.lease import Lease, acquire

__all__ = [
    "LOCK_STALE_SECONDS",
    "StaleWatch",
    "busy",
    "kb_lock",
    "recover_locks",
    "refused",
    "remove_if_same",
]

log = logging.getLogger("kbserver.store.writer")


def busy(repo_path: str, wait: float) -> Busy:
    name = os.path.basename(repo_path).removesuffix(".git")
    return Busy(
        f"KB {name} is busy: another write held it for more than {wait:g} s; retry in a moment",
        retry_after=max(1, min(5, round(wait))),
    )


@contextmanager
def kb_lock(repo_path: str, wait: float | None = None) -> Iterator[Lease]:
    """Hold the KB's cross-process writer lease (store.lease: the flock on `kbserver.lock` and a
    fencing token; the kernel drops the flock if we die, a holder frozen past STALE_SECONDS is
    taken over). With `wait`, raises Busy when it is not ours within that many seconds."""
    lease = acquire(repo_path, wait, busy(repo_path, wait or 0))
    try:
        yield lease
    finally:
        lease.release()


def refused(repo_path: str) -> Busy:
    """A write whose lease was taken over (its process did not progress): nothing of it committed."""
    name = os.path.basename(repo_path).removesuffix(".git")
    return Busy(
        f"KB {name} is busy: this write's lock was taken over while its process did not progress; "
        "nothing was committed; retry",
        retry_after=1,
    )


def recover_locks(repo_path: str) -> list[str]:
    """Remove `*.lock` files that a crashed writer left behind. Call only while holding the flock."""
    removed = []
    patterns = ("refs/**/*.lock", "objects/**/*.lock", "*.lock")
    for pattern in patterns:
        for lock in glob.glob(os.path.join(repo_path, pattern), recursive=True):
            if os.path.basename(lock) == "kbserver.lock":
                continue
            os.remove(lock)
            removed.append(lock)
    if removed:
        log.warning("removed stale lock files: %s", removed)
    return removed


LOCK_STALE_SECONDS = 5.0  # a ref lock file unchanged this long (this process's clock) is a crash's


class StaleWatch:
    """Whether a lock file stayed the same file, unchanged, for LOCK_STALE_SECONDS of our clock
    (no clocks compared: a live C git or writer holds one for milliseconds)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: tuple[int, int, int] | None = None
        self._since = time.monotonic()

    def stale(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.seen = None
            return False  # gone: the next try takes it
        now = (st.st_ino, st.st_mtime_ns, st.st_size)
        if now != self.seen:
            self.seen, self._since = now, time.monotonic()
            return False
        return time.monotonic() - self._since >= LOCK_STALE_SECONDS


def remove_if_same(path: str, seen: tuple[int, int, int] | None) -> None:
    """Remove the lock file at `path` if it is still the one watched (not a new holder's)."""
    try:
        st = os.stat(path)
        if seen is not None and (st.st_ino, st.st_mtime_ns, st.st_size) == seen:
            os.remove(path)
    except FileNotFoundError:
        pass
