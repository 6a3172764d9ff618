"""A KB's writer lease: the flock on `kbserver.lock`, plus a fencing token that outlives a holder
that stopped progressing (SIGSTOPped, partitioned from shared storage).

The flock alone has no bound: a frozen process keeps it for as long as it is frozen. So each holder
also claims a token, the next number in `kbserver-lease/`, created exclusively (O_EXCL: one claimant
wins, also over NFS), and its process touches that file every HEARTBEAT_SECONDS. A waiter that sees
the current token file unchanged for STALE_SECONDS of its own clock (no clocks are compared) takes
the lease over without the flock by claiming the next number; so does one that sees the flock held
for that long under a released lease (a process frozen right after the kernel granted it the flock).
The old holder, when it runs again, is refused where its write would land: the ref update checks,
under the ref lock, that its token is still the largest (`Lease.check`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass, field

__all__ = ["HEARTBEAT_SECONDS", "STALE_SECONDS", "Lease", "LeaseLost", "acquire"]

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 1.0  # a holder's process touches its token file this often
STALE_SECONDS = 10.0  # a token file unchanged this long (the observer's clock) is taken over
POLL_SECONDS = 0.2  # a waiter looks at the lease folder this often (the flock wakes it at once)
FOLDER = "kbserver-lease"  # not *.lock: nothing removes it as a leftover lock file
KEEP = 4  # token files kept behind the current one (a stale holder finds itself refused)


class LeaseLost(Exception):
    """The lease was taken over: this holder's token is no longer the current one."""


@dataclass
class Lease:
    """A held writer lease of one KB: its token and, unless taken over, the flock's descriptor."""

    repo: str
    token: int
    fd: int | None  # the flock's (None: taken over from a holder that stopped progressing)
    released: bool = field(default=False)

    @property
    def path(self) -> str:
        return os.path.join(self.repo, FOLDER, _name(self.token))

    def current(self) -> bool:
        """Whether no later token was claimed (nobody took this lease over)."""
        latest = _latest(self.repo)
        return latest is not None and latest[0] == self.token

    def check(self) -> None:
        """Raise LeaseLost unless this lease is current (call under the ref lock, before main moves)."""
        if not self.current():
            raise LeaseLost(f"the writer lease of {self.repo} was taken over (token {self.token} is stale)")

    def release(self) -> None:
        """Mark the token released (the next holder claims the next one at once), drop the flock."""
        if self.released:
            return
        self.released = True
        _heartbeat.forget(self)
        try:
            os.close(os.open(self.path + ".free", os.O_WRONLY | os.O_CREAT, 0o644))
        except OSError:
            pass  # cleaned up by a later holder: it is not current anyway
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def _name(token: int) -> str:
    return f"{token:020d}"


def _latest(repo: str) -> tuple[int, bool, str] | None:
    """The current token: (number, released, kind), or None when none was ever claimed."""
    folder = os.path.join(repo, FOLDER)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return None
    tokens = sorted(n for n in names if n.isdigit())
    if not tokens:
        return None
    top = tokens[-1]
    kind = "flock"
    try:
        with open(os.path.join(folder, top), "rb") as f:
            kind = f.read(64).decode("ascii", "replace").strip() or "flock"
    except OSError:
        pass
    return int(top), top + ".free" in names, kind


def _stamp(repo: str, token: int) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(repo, FOLDER, _name(token)))
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _claim(repo: str, after: int | None, kind: str) -> int | None:
    """Claim the token after `after` (exclusively); None when another claimant got it first."""
    folder = os.path.join(repo, FOLDER)
    os.makedirs(folder, exist_ok=True)
    token = (after or 0) + 1
    # Written whole under a name of its own, then linked in: link(2) fails if the name exists.
    tmp = os.path.join(folder, f".claim-{os.getpid()}-{threading.get_ident()}-{token}")
    with open(tmp, "wb") as f:
        f.write(kind.encode())
    try:
        os.link(tmp, os.path.join(folder, _name(token)))
    except FileExistsError:
        return None
    finally:
        os.remove(tmp)
    for name in os.listdir(folder):  # the old ones: a stale holder is refused without them too
        number = name.split(".", 1)[0]
        if number.isdigit() and int(number) < token - KEEP:
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass
    return token


class _Heartbeat:
    """One thread per process touching every held lease's token file."""

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._leases: dict[int, Lease] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def keep(self, lease: Lease) -> None:
        with self._lock:
            self._leases[id(lease)] = lease
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kbserver-lease", daemon=True)
                self._thread.start()

    def forget(self, lease: Lease) -> None:
        with self._lock:
            self._leases.pop(id(lease), None)

    def _run(self) -> None:
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            with self._lock:
                leases = list(self._leases.values())
            for lease in leases:
                try:
                    os.utime(lease.path)
                except OSError:
                    pass  # removed: it was taken over long ago


_heartbeat = _Heartbeat()


def acquire(repo: str, wait: float | None, busy: Exception) -> Lease:
    """Hold `repo`'s writer lease: the flock and a new token, or a takeover (see the module).

    Raises `busy` when it is not ours within `wait` seconds (None: no bound)."""
    fd = os.open(os.path.join(repo, "kbserver.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        lease = _acquire(repo, fd, wait, busy)
    except BaseException:
        os.close(fd)
        raise
    if lease.fd is None:
        os.close(fd)
    _heartbeat.keep(lease)
    return lease


def _acquire(repo: str, fd: int, wait: float | None, busy: Exception) -> Lease:
    deadline = None if wait is None else time.monotonic() + wait
    flock = _FlockWaiter(fd)
    seen: tuple[object, ...] | None = None  # what the lease folder looked like, and since when
    since = time.monotonic()
    try:
        while True:
            have_flock = flock.wait(POLL_SECONDS if seen is not None else 0.0)
            latest = _latest(repo)
            now = time.monotonic()
            if latest is None:
                state: tuple[object, ...] = (None,)
            else:
                state = (latest, _stamp(repo, latest[0]))
            if state != seen:
                seen, since = state, now
            unchanged = now - since >= STALE_SECONDS
            if latest is None:
                take = have_flock or unchanged
            else:
                _, released, kind = latest
                if have_flock:  # a holder with the flock that no longer has it died (or released)
                    take = released or kind == "flock" or unchanged
                else:  # without the flock: only a holder that stopped progressing is taken over
                    take = (released and kind == "takeover") or unchanged
            if take:
                token = _claim(
                    repo, None if latest is None else latest[0], "flock" if have_flock else "takeover"
                )
                if token is not None:
                    if not have_flock:
                        log.warning(
                            "the writer lock of %s was held for %g s by a process that does not progress; "
                            "taken over (token %d)",
                            repo,
                            STALE_SECONDS,
                            token,
                        )
                    flock.settle(keep=have_flock)
                    return Lease(repo, token, fd if have_flock else None)
                continue  # another claimant was first: look again at once
            if deadline is not None and now > deadline:
                raise busy
            if have_flock:  # ours, but a taker that progresses still holds the lease: let it finish
                time.sleep(POLL_SECONDS)
    except BaseException:
        flock.settle(keep=False)
        raise


class _FlockWaiter:
    """flock(2) has no timeout: a helper thread blocks in it (the kernel wakes it when the lock
    frees) through a dup of `fd` (the same open file, so the same lock), and the caller polls."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._got = threading.Event()
        self._guard = threading.Lock()
        self._abandoned = False
        self._thread: threading.Thread | None = None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._got.set()
        except BlockingIOError:
            helper = os.dup(fd)
            self._thread = threading.Thread(
                target=self._take, args=(helper,), name="kbserver-flock", daemon=True
            )
            self._thread.start()

    def _take(self, helper: int) -> None:
        try:
            fcntl.flock(helper, fcntl.LOCK_EX)
            with self._guard:
                if self._abandoned:
                    fcntl.flock(helper, fcntl.LOCK_UN)
                else:
                    self._got.set()
        finally:
            os.close(helper)  # the caller's `fd` keeps the open file (and its lock)

    def wait(self, seconds: float) -> bool:
        return self._got.wait(seconds) if seconds > 0 else self._got.is_set()

    def settle(self, keep: bool) -> None:
        """Keep the flock if it came (`keep`), else give it up now or as soon as it comes."""
        with self._guard:
            self._abandoned = True
            if self._got.is_set() and not keep:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
