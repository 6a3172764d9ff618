"""Who follows main: a lease on `follower.lock` (a flock) with a fencing term recorded in the file.

One process per data folder (per node's cache folder) follows at a time. Each new leader records a
term one larger than the last in the lock file before it counts as leading, and checks that the
file still holds its term before every write of a sink (`fence`): a flock on a network file system
can be lost with the connection, and a leader that finds a larger term stands by instead of writing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

__all__ = ["Lead", "NotLeading", "read_term"]

log = logging.getLogger(__name__)


class NotLeading(Exception):
    """This process no longer follows main (another took a larger term): a sink's write is refused."""


class Lead:
    """This process's lease on the lock file: taken, checked before each write, dropped."""

    def __init__(self, lock_path: Path) -> None:
        self.lock_path = lock_path
        self._fd: int | None = None
        self._lock = threading.Lock()  # the sink threads check and drop the lead concurrently
        self.term = 0  # the fencing token of this process's leadership: each new leader's is larger

    @property
    def leading(self) -> bool:
        return self._fd is not None

    def try_lead(self) -> bool:
        """Take the lead if nobody holds it, recording a new term first; True while leading."""
        with self._lock:
            if self._fd is not None:
                return True
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:
                term = _next_term(fd)
            except OSError as exc:  # the term cannot be recorded: leading without it is unfenced
                os.close(fd)  # the flock goes with it; the next lead try comes later
                log.warning("could not record a follower term in %s: %s", self.lock_path, exc)
                return False
            # leading only once the term is in the file: whoever sees `leading` may read it
            self.term, self._fd = term, fd
        return True

    def still_leading(self) -> bool:
        """Whether no other process took the lead since (its term would be larger): a flock on a
        network file system can be lost with the connection, so the leader checks before it writes.
        Under the lock: every sink thread checks, and two that find a larger term at once must
        not both close the file (the second close would hit a descriptor reused elsewhere)."""
        with self._lock:
            fd = self._fd
            if fd is None:
                return False
            try:
                if _read_term(fd) == self.term:
                    return True
            except OSError:  # the lock file cannot be read now (a network file system): do not write
                return False
            self._drop()
        log.error("another process took over following main (term > %d); standing by", self.term)
        return False

    def fence(self) -> None:
        """Raise NotLeading unless this process still leads with its term (a sink's last check)."""
        if not self.still_leading():
            raise NotLeading(f"another process took over following main (term > {self.term})")

    def release(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        """Close the lock file, which releases the flock (the lock held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_term(lock_path: Path) -> int:
    """The term recorded in `lock_path` now (0: none yet): a standby learns that a new leader came."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        return _read_term(fd)
    except OSError:
        return 0
    finally:
        os.close(fd)


def _read_term(fd: int) -> int:
    text = os.pread(fd, 32, 0).split(b"\n")[0].strip()
    return int(text) if text.isdigit() else 0


def _next_term(fd: int) -> int:
    """Record a new leadership term in the lock file (held): one more than the last one."""
    term = _read_term(fd) + 1
    data = b"%d\n" % term
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    return term
