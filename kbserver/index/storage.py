"""The index folder: generations swapped by an atomic CURRENT pointer, and the writer lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Folder", "IndexCorrupt", "index_exists"]

# folder/
#   LOCK        flock'ed by the one writer (update or rebuild) across threads and processes
#   CURRENT     the name of the live generation, replaced atomically (write a temp file, rename)
#   gen-<hex>/  one Whoosh index; a rebuild fills a new one, then points CURRENT at it
_LOCK = "LOCK"
_CURRENT = "CURRENT"
_GEN = re.compile(r"gen-[0-9a-f]{16}\Z")
_TMP = ".tmp-"

_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


class IndexCorrupt(Exception):
    """The index folder cannot be opened or read; delete the folder and rebuild it from git."""


def index_exists(root: Path) -> bool:
    """True when `root` holds a published index (it may still be damaged); reads only."""
    return (root / _CURRENT).is_file()


def _thread_lock(root: Path) -> threading.Lock:
    with _thread_locks_guard:
        return _thread_locks.setdefault(root, threading.Lock())


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _flock(fd: int, timeout: float, root: Path) -> None:
    """Take an exclusive flock on `fd`, waiting at most `timeout` seconds (then TimeoutError)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    # Polling lets a busy writer in another process re-take the lock before we look again, again and
    # again (docs/performance.md, "Measurements behind the code"). A blocked flock is woken by the
    # kernel at release, so it runs in a helper thread to bound the wait. The helper locks through its
    # own duplicate of `fd` (same open file, so the same lock) and closes it: after a timeout the caller
    # closes `fd`, and a lock the helper gets later goes away with the last descriptor.
    failure: list[BaseException] = []
    dup = os.dup(fd)

    def wait() -> None:
        try:
            fcntl.flock(dup, fcntl.LOCK_EX)
        except BaseException as e:  # reported to the caller below
            failure.append(e)
        finally:
            os.close(dup)

    helper = threading.Thread(target=wait, name="kbserver-index-flock", daemon=True)
    helper.start()
    helper.join(timeout)
    if helper.is_alive():
        raise TimeoutError(f"index writer lock on {root} not acquired in {timeout:g} s")
    if failure:
        raise failure[0]


class Folder:
    """Layout and locking of one index folder; holds no open files between calls."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._current = self.root / _CURRENT

    @contextlib.contextmanager
    def write_lock(self, timeout: float) -> Iterator[None]:
        """Hold the writer lock: waits up to `timeout` seconds, then raises TimeoutError."""
        deadline = time.monotonic() + timeout
        # Threads of this process queue on a lock, processes on the flock.
        lock = _thread_lock(self.root)
        if not lock.acquire(timeout=timeout):
            raise TimeoutError(f"index writer lock on {self.root} not acquired in {timeout:g} s")
        try:
            try:
                fd = os.open(self.root / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError as e:  # the folder was removed under an open index
                raise IndexCorrupt(f"{self.root} is gone") from e
            try:
                _flock(fd, max(0.0, deadline - time.monotonic()), self.root)
                yield  # closing the file below releases the flock
            finally:
                os.close(fd)
        finally:
            lock.release()

    def current(self) -> str | None:
        """The live generation's name; None for a folder with no index yet."""
        try:
            name = self._current.read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise IndexCorrupt(f"{self._current} is unreadable: {e}") from e
        if _GEN.match(name) is None or not (self.root / name).is_dir():
            raise IndexCorrupt(f"{self._current} names no index generation: {name[:80]!r}")
        return name

    def current_stamp(self) -> tuple[int, int, int]:
        """Changes whenever CURRENT is replaced (a stat: cheap enough to check before every search)."""
        try:
            st = os.stat(self._current)
        except FileNotFoundError as e:
            raise IndexCorrupt(f"{self._current} is missing") from e
        return st.st_ino, st.st_mtime_ns, st.st_size

    def is_empty(self) -> bool:
        """True when the folder holds nothing but leftovers of this module (no garbage, no old index)."""
        for entry in self.root.iterdir():
            if entry.name != _LOCK and _GEN.match(entry.name) is None and _TMP not in entry.name:
                return False
        return True

    def generation_bytes(self, name: str | None) -> int:
        """The size of generation `name`'s files (0 when unknown or gone)."""
        if name is None:
            return 0
        total = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.root / name):
                with contextlib.suppress(OSError):
                    total += entry.stat().st_size
        return total

    def new_generation(self) -> tuple[str, Path]:
        """Create an empty generation folder (not live until `publish`)."""
        name = f"gen-{secrets.token_hex(8)}"
        path = self.root / name
        path.mkdir()
        return name, path

    def publish(self, name: str) -> None:
        """Make generation `name` live, durably: its files first, then the pointer, then the folder."""
        gen = self.root / name
        for entry in gen.iterdir():
            if entry.is_file():
                _fsync(entry)
        _fsync(gen, directory=True)
        tmp = self.root / f"{_CURRENT}{_TMP}{secrets.token_hex(4)}"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(name + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._current)
        _fsync(self.root, directory=True)

    def remove_others(self, keep: str) -> None:
        """Delete every generation but `keep` and stray temp files (call while holding the writer lock).

        Readers that already opened an old generation keep working: its files are open or mapped.
        """
        for entry in self.root.iterdir():
            if entry.name == keep:
                continue
            if _GEN.match(entry.name):
                shutil.rmtree(entry, ignore_errors=True)
            elif _TMP in entry.name:
                with contextlib.suppress(OSError):
                    entry.unlink()

    def discard(self, path: Path) -> None:
        """Remove a generation that never went live."""
        shutil.rmtree(path, ignore_errors=True)
