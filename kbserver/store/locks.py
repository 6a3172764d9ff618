"""A KB's cross-process writer lock (a flock on `kbserver.lock`, bounded) and its ref lock files."""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kbserver.core.errors import Busy

__all__ = ["LOCK_STALE_SECONDS", "StaleWatch", "busy", "kb_lock", "recover_locks", "remove_if_same"]

log = logging.getLogger("kbserver.store.writer")


def busy(repo_path: str, wait: float) -> Busy:
    name = os.path.basename(repo_path).removesuffix(".git")
    return Busy(
        f"KB {name} is busy: another write held it for more than {wait:g} s; retry in a moment",
        retry_after=max(1, min(5, round(wait))),
    )


@contextmanager
def kb_lock(repo_path: str, wait: float | None = None) -> Iterator[None]:
    """Hold the KB's cross-process writer lock (`kbserver.lock`); the kernel drops it if we die.

    With `wait`, raises Busy when the lock is not ours within that many seconds.
    """
    fd = os.open(os.path.join(repo_path, "kbserver.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _flock_within(fd, wait, repo_path)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _flock_within(fd: int, wait: float, repo_path: str) -> None:
    """flock(2) has no timeout: a helper thread blocks in it (the kernel wakes it when the lock
    frees, no polling) while the caller waits at most `wait`. The helper locks through a dup of
    `fd` (the same open file, so the same lock); a helper whose caller gave up unlocks at once."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    helper_fd = os.dup(fd)
    got = threading.Event()
    guard = threading.Lock()
    abandoned = [False]

    def take() -> None:
        try:
            fcntl.flock(helper_fd, fcntl.LOCK_EX)
            with guard:
                if abandoned[0]:
                    fcntl.flock(helper_fd, fcntl.LOCK_UN)
                else:
                    got.set()
        finally:
            os.close(helper_fd)  # the caller's `fd` keeps the open file (and its lock)

    threading.Thread(target=take, name="kbserver-flock", daemon=True).start()
    if got.wait(wait):
        return
    with guard:
        if got.is_set():
            return
        abandoned[0] = True
    raise busy(repo_path, wait)


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
