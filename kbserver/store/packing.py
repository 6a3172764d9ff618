"""Keeping a KB's objects small: C git's repack with deltas, one at a time per KB, in the background.

Every commit writes a new copy of each tree along its paths, so a pack without deltas (dulwich's
`pack_loose_objects`) keeps a whole big tree per memory added. `git repack --geometric=2 -d` packs
the loose objects with deltas (one version of a tree is stored as the few bytes that differ from
another) and rolls small packs into bigger ones so their number stays logarithmic (dulwich looks in
every pack on a miss). Objects already packed whole (by dulwich before this packing) are never made
deltas again by the geometric roll-up; the full repack (`full=True`, `git repack -a -d -f`,
`kbserver repack --full`) computes every delta again into one pack. `bench/disk.py` measures both.

Safety, which comes from git's own protocol: a new pack is written to a temporary file and renamed
into place, its `.idx` last (readers see a pack only once it is complete); loose objects and
rolled-up packs are deleted only after it, and only objects the new pack holds. Nothing is ever
dropped: the geometric roll-up keeps every object of the packs it merges, and the full repack
keeps unreachable ones (`--keep-unreachable`), so an object a writer is about to reference is
never lost. A repack killed at any point leaves the repository complete (at worst a temporary
file, removed by the next repack once it is an hour old). Writers beside it only ever write loose
objects (store.trees.put_loose), and retry when git's prune-packed removes an emptied `objects/xx`
folder under them. Readers whose pack disappeared find the object
in the new pack (dulwich rescans the pack folder on a miss; KBRepo retries a read that raced with
the close of a pack).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DELTIFIED",
    "LOCK_NAME",
    "PackStats",
    "Packer",
    "RepackResult",
    "deltified",
    "kill",
    "mark_deltified",
    "pack_stats",
    "repack",
    "repack_command",
]

log = logging.getLogger(__name__)

LOCK_NAME = "kbserver-pack.flock"  # not *.lock: recover_locks removes those
# Present once nothing in the repository is packed whole any more: made by a full repack, and by
# Repos.create for a new KB. A KB without it (written before this packing) gets one full repack.
DELTIFIED = "kbserver-deltified"
_TEMP_PREFIXES = ("tmp_pack_", "tmp_idx_", "tmp_rev_", "tmp_mtimes_", "tmp_bitmap_", ".tmp-")
_TEMP_AGE_SECONDS = 3600.0


@dataclass(frozen=True)
class PackStats:
    """What the object folder holds: loose objects and packs, in files and bytes."""

    loose_objects: int
    loose_bytes: int
    packs: int
    pack_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.loose_bytes + self.pack_bytes


@dataclass(frozen=True)
class RepackResult:
    """One repack: how it was done, what the object folder held before and after, how long it took."""

    method: str  # "git-geometric", "git-full" or "dulwich" (no git binary: loose objects packed whole)
    before: PackStats
    after: PackStats
    seconds: float


def pack_stats(path: str) -> PackStats:
    """Count the loose objects and packs of the repository at `path` (one listing of objects/)."""
    objects = os.path.join(path, "objects")
    loose = loose_bytes = packs = pack_bytes = 0
    with os.scandir(objects) as folders:
        for folder in folders:
            if len(folder.name) != 2 or not folder.is_dir():
                continue
            with contextlib.suppress(FileNotFoundError), os.scandir(folder.path) as files:
                for f in files:
                    with contextlib.suppress(FileNotFoundError):
                        loose_bytes += f.stat().st_size
                        loose += 1
    with contextlib.suppress(FileNotFoundError), os.scandir(os.path.join(objects, "pack")) as files:
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                size = f.stat().st_size
                pack_bytes += size
                packs += f.name.endswith(".pack")
    return PackStats(loose, loose_bytes, packs, pack_bytes)


def repack_command(git: str, path: str, *, full: bool = False) -> list[str]:
    """The git command line of a repack (geometric, or `full`: every delta computed again)."""
    settings = [
        "-c", "pack.threads=1",  # one core of two: writers keep the other
        "-c", "repack.writeBitmaps=false",
        "-c", "core.fsync=pack,pack-metadata",  # the new pack is on disk before loose copies go
        "-c", "core.fsyncMethod=fsync",
    ]  # fmt: skip
    mode = ["-a", "-d", "-f", "--keep-unreachable"] if full else ["--geometric=2", "-d"]
    # Not niced: on a busy machine a niced repack starves while loose objects pile up
    # (docs/performance.md, "Measurements behind the code"); one pack thread leaves the other core
    # to the server.
    return [git, *settings, "-C", path, "repack", "-q", *mode]


@contextlib.contextmanager
def _pack_lock(path: str) -> Iterator[bool]:
    """Try to hold the KB's repack lock (across processes); yields False when another holds it."""
    fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _remove_old_temp_files(path: str) -> None:
    """Temporary files of a repack that was killed, once they are an hour old (a live git's are younger)."""
    folder = os.path.join(path, "objects", "pack")
    now = time.time()
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as files:
        for f in files:
            if f.name.startswith(_TEMP_PREFIXES):
                with contextlib.suppress(FileNotFoundError):
                    if now - f.stat().st_mtime > _TEMP_AGE_SECONDS:
                        os.remove(f.path)
                        log.info("removed %s, left by a repack that was stopped", f.path)


def repack(
    path: str,
    *,
    full: bool = False,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
) -> RepackResult | None:
    """Repack the repository at `path`; None when another repack of it is running.

    `started` gets the git process (to stop it early: a killed repack is harmless). Without a git
    binary the loose objects are packed by dulwich, whole (no deltas). Raises OSError or
    subprocess.CalledProcessError when git fails; the repository is complete either way.
    """
    with _pack_lock(path) as mine:
        if not mine:
            log.info("a repack of %s is running already; not starting another", path)
            return None
        _remove_old_temp_files(path)
        before = pack_stats(path)
        began = time.monotonic()
        git = shutil.which("git")
        log.info(
            "repacking %s (%s): %d loose objects and %d packs (%d bytes)",
            path,
            "full" if full else "geometric",
            before.loose_objects,
            before.packs,
            before.total_bytes,
        )
        if git is None:
            method = "dulwich"
            _dulwich_pack_loose(path)
        else:
            method = "git-full" if full else "git-geometric"
            proc = subprocess.Popen(
                repack_command(git, path, full=full),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: a kill stops pack-objects too
            )
            try:
                if started is not None:
                    started(proc)
                _, err = proc.communicate()
            except BaseException:  # stopped half-way (an error, Ctrl-C): git goes too, never orphaned
                kill(proc)
                proc.wait()
                raise
            if proc.returncode != 0:
                raise subprocess.CalledProcessError(proc.returncode, proc.args, stderr=err)
        if full:
            mark_deltified(path)
        result = RepackResult(method, before, pack_stats(path), time.monotonic() - began)
    log.info(
        "repacked %s (%s) in %.1f s: %d loose objects and %d packs (%d bytes)"
        " -> %d loose objects and %d packs (%d bytes)",
        path,
        method,
        result.seconds,
        before.loose_objects,
        before.packs,
        before.total_bytes,
        result.after.loose_objects,
        result.after.packs,
        result.after.total_bytes,
    )
    return result


def mark_deltified(path: str) -> None:
    """Record that the repository at `path` holds no objects packed whole (see DELTIFIED)."""
    with open(os.path.join(path, DELTIFIED), "w") as f:
        f.write("objects packed with deltas by C git (kbserver.store.packing)\n")


def deltified(path: str) -> bool:
    return os.path.exists(os.path.join(path, DELTIFIED))


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop a repack started by `repack` at once, with its pack-objects (safe at any point)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _dulwich_pack_loose(path: str) -> None:
    from dulwich.object_store import DiskObjectStore
    from dulwich.repo import Repo

    log.warning("no git binary on the PATH: packing the loose objects of %s without deltas", path)
    with Repo(path) as git:
        store = git.object_store
        assert isinstance(store, DiskObjectStore)
        store.fsync_object_files = True  # the pack and its index, before the deletes
        store.pack_loose_objects()


class Packer:
    """Runs the repacks of one KB in a background thread, one at a time, when enough was written.

    The writer reports each batch (`wrote`); past `every_commits` commits or `every_bytes` bytes
    of loose objects since the last repack, a repack starts. Once it is done `done` runs (the
    repository drops the packs it deleted). `close` stops a running repack (git is killed: that is
    safe) and waits for the thread.
    """

    def __init__(
        self,
        path: str,
        done: Callable[[], None],
        *,
        every_commits: int = 1000,
        every_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._path = path
        self._done = done
        self.every_commits = every_commits
        self.every_bytes = every_bytes
        self._commits = 0
        self._bytes = 0
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self.last: RepackResult | None = None
        self.failures = 0

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def wrote(self, commits: int, loose_bytes: int) -> bool:
        """Count a batch the writer committed; starts a repack when due. True when one started."""
        with self._mutex:
            self._commits += commits
            self._bytes += loose_bytes
            due = self._commits >= self.every_commits or self._bytes >= self.every_bytes
            if not due or self._closed or self.running:
                return False
            self._commits = self._bytes = 0
            name = f"repack {Path(self._path).name}"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()
            return True

    def start(self) -> bool:
        """Start a repack now unless one is running."""
        with self._mutex:
            self._commits = self.every_commits
        return self.wrote(0, 0)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the running repack (if any) to finish."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _started(self, proc: subprocess.Popen[bytes]) -> None:
        with self._mutex:
            self._proc = proc
            closed = self._closed
        if closed:
            kill(proc)

    def _run(self) -> None:
        try:
            # A KB packed whole by an older kbserver gets one full repack: the geometric roll-up
            # would keep those whole copies for good.
            result = repack(self._path, full=not deltified(self._path), started=self._started)
            if result is not None:
                self.last = result
        except Exception as exc:
            with self._mutex:
                closed = self._closed
            if not closed:  # killed by close: nothing to report
                self.failures += 1
                detail = getattr(exc, "stderr", b"") or b""
                log.exception("repack of %s failed (nothing was lost): %s", self._path, detail[-500:])
            return
        finally:
            with self._mutex:
                self._proc = None
        with self._mutex:
            if self._closed:
                return
        try:
            self._done()
        except Exception:
            log.exception("after the repack of %s, dropping deleted packs failed", self._path)

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            proc = self._proc
        if proc is not None:
            kill(proc)
        self.wait()
