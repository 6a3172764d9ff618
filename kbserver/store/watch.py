"""Being told that a file in a folder changed, instead of looking every few milliseconds (Linux).

The follower of a data folder tails its feed, and polling it kept every idle process busy.
inotify(7) tells a blocked thread of every write, create and rename in the
folder as it happens, from any process on this machine. It is not there on other systems and
says nothing of writes made by other machines to a network file system: `FolderWatch.open`
returns None where it cannot watch, and callers keep a (slower) poll for what it cannot see.

The standard library has no binding; the four calls are made through ctypes, and the events are
read and filtered here by name (the folder holds other files, e.g. the control database).
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct
import threading
from collections.abc import Collection
from pathlib import Path

__all__ = ["FolderWatch"]

log = logging.getLogger(__name__)

# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_Q_OVERFLOW = 0x4000  # events were dropped: anything may have changed
_IN_IGNORED = 0x8000  # the watch is gone (the folder was removed)
_MASK = _IN_MODIFY | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of NUL-padded name


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):  # not Linux (or no inotify in this libc)
        return None
    return libc


class FolderWatch:
    """Wakes `wait` when one of `names` in `folder` is written, created or renamed."""

    def __init__(self, fd: int, names: Collection[str]) -> None:
        self._fd = fd
        self._names = {os.fsencode(n) for n in names}
        self._wake_r, self._wake_w = os.pipe()  # `close` wakes a blocked `wait` through this
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(cls, folder: Path, names: Collection[str]) -> FolderWatch | None:
        """A watch of `folder`, or None where inotify is missing or refused (e.g. the per-user
        limit of instances reached): the caller then polls."""
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            log.info("inotify unavailable (%s); polling %s", os.strerror(ctypes.get_errno()), folder)
            return None
        if libc.inotify_add_watch(fd, os.fsencode(folder), _MASK) < 0:
            log.info("cannot watch %s (%s); polling it", folder, os.strerror(ctypes.get_errno()))
            os.close(fd)
            return None
        return cls(fd, names)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until one of the names changed (True), or `timeout` passed or the watch was closed
        (False). Events of other files in the folder are read and dropped."""
        while True:
            try:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [], timeout)
            except (OSError, ValueError):  # closed meanwhile
                return False
            if self._closed or not ready or self._wake_r in ready:
                return False
            if self._changed():
                return True

    def _changed(self) -> bool:
        try:
            data = os.read(self._fd, 64 * 1024)
        except OSError:  # nothing left to read (another wake-up took it), or closed
            return False
        changed = False
        offset = 0
        while offset + _EVENT.size <= len(data):
            _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & (_IN_Q_OVERFLOW | _IN_IGNORED) or name in self._names:
                changed = True
        return changed

    def close(self) -> None:
        """Stop watching; a blocked `wait` returns False."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.write(self._wake_w, b"x")
        # The waiting thread may still be in select on these descriptors: the caller joins it
        # before the descriptors are closed (`release`).

    def release(self) -> None:
        """Close the descriptors, once no thread waits any more (after `close` and a join)."""
        self.close()
        for fd in (self._fd, self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
