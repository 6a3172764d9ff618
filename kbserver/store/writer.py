"""The single writer of a KB: group commit, cross-process flock, compare-and-swap of main, fsync."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from dulwich.index import (
    validate_path,
    validate_path_element_default,
    validate_path_element_hfs,
    validate_path_element_ntfs,
)
from dulwich.objects import Blob, Commit, ObjectID, ShaFile
from dulwich.refs import DiskRefsContainer, Ref

from kbserver.core.errors import AlreadyExists, Busy, InvalidRequest, KBError
from kbserver.core.paths import parent_dirs
from kbserver.store.durable import fsync_path, sync_files
from kbserver.store.lease import Lease
from kbserver.store.locks import (
    LOCK_STALE_SECONDS,
    StaleWatch,
    busy,
    kb_lock,
    recover_locks,
    refused,
    remove_if_same,
)
from kbserver.store.objects import BIG_TREE
from kbserver.store.packing import Packer
from kbserver.store.refswap import RefLocked, StaleRefWriter, swap_main
from kbserver.store.repo import MAIN, KBRepo
from kbserver.store.trees import edit_tree, put_loose, write_loose
from kbserver.store.views import TreeView

__all__ = ["WAIT_SECONDS", "CommitPlan", "Fence", "Job", "Writer", "kb_lock", "recover_locks"]

# dulwich's ports of C git's verify_path: ".git", its NTFS short names and streams, its HFS+ spellings.
_GIT_PATH_CHECKS = (validate_path_element_default, validate_path_element_ntfs, validate_path_element_hfs)

log = logging.getLogger(__name__)

WAIT_SECONDS = 30.0  # the default bound of a write's wait for its KB (the lock, the queue, retries)


@dataclass(frozen=True)
class Fence:
    """The lease a write holds (a proposal's claim, a key's reservation) and its fencing token.

    `check` raises (a KBError) once the lease is no longer current: the writer calls it while it
    holds the KB's writer lock, before each attempt to move main, so a write whose lease was taken
    over never commits, however long it waited. The commit records `token` as `Kb-Fence`, and
    `trailers` besides (what names the lease, so a takeover can find the commit on main).
    """

    token: int
    check: Callable[[], None]
    trailers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitPlan:
    """What one write commits: new bytes per path (None deletes), message and metadata."""

    changes: dict[str, bytes | None]
    message: str
    author: str
    trailers: dict[str, str] = field(default_factory=dict)
    result: object = None  # handed back to the caller untouched (e.g. per-file sha256s)
    fence: Fence | None = None


# A job computes its plan from the files at the tip it is applied on; it may raise a KBError.
Job = Callable[[TreeView], CommitPlan]


@dataclass(eq=False)  # found in the queue by identity
class _Pending:
    job: Job
    wake: threading.Event = field(default_factory=threading.Event)  # finished, or asked to lead
    finished: bool = False
    leads: bool = False  # this caller's thread commits the next batch (set under the mutex)
    outcome: tuple[str, str | None, object] | None = None
    error: BaseException | None = None

    def finish(self, error: BaseException | None = None) -> None:
        if error is not None:
            self.error = error
        self.finished = True
        self.wake.set()


class Writer:
    """Serialises the writes of one KB, within the process and across processes.

    Callers block in `submit`. Whoever finds no writer active becomes the leader: it takes the
    queued jobs (its own among them), applies them one after another on the current head (each its
    own commit), flushes all their objects with one round of fsync, and moves main once by
    compare-and-swap. If another process moved main meanwhile, the batch is re-applied on the new
    head, so only real conflicts (raised by the jobs themselves) ever reach a caller. Then the
    leader hands over: the first caller still queued commits the next batch, so no caller waits
    for more than its own batch.

    Every wait is bounded by `wait` seconds: the KB's lock (another process's write), a place in
    the queue, the retries of the compare-and-swap. Then the caller gets Busy, and nothing changed.
    """

    def __init__(
        self, repo: KBRepo, *, fsync: bool = True, max_batch: int = 64, wait: float = WAIT_SECONDS
    ) -> None:
        self._repo = repo
        self._objects = os.path.join(repo.path, "objects")
        self._fsync = fsync
        self._max_batch = max_batch
        self._wait = wait
        self._mutex = threading.Lock()
        self._queue: list[_Pending] = []
        self._leading = False
        self._loose_bytes = 0  # written by the batch being committed (for the packer)
        # Loose objects slow every read (dulwich rescans objects/pack on a miss) and a big tree
        # is stored whole in each: the packer repacks them, with deltas, in the background.
        self.packer = Packer(repo.path, repo.drop_deleted_packs)

    def close(self) -> None:
        """Stop a running repack (safe: git leaves the repository complete) and wait for it."""
        self.packer.close()

    def submit(self, job: Job) -> tuple[str, str | None, object]:
        """Apply `job` as one commit on main; returns (version, parent, plan.result).

        Raises the job's KBError, and Busy when the KB stayed busy for longer than the writer's
        bound (nothing of `job` was committed then).
        """
        pending = _Pending(job)
        deadline: float | None = time.monotonic() + self._wait
        with self._mutex:
            self._queue.append(pending)
            if not self._leading:
                self._leading = pending.leads = True
        while not pending.finished:
            if pending.leads:
                self._lead(pending)
                continue
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if pending.wake.wait(timeout=timeout):
                pending.wake.clear()
                continue
            with self._mutex:
                if pending in self._queue and not pending.leads:  # still waiting its turn: give up
                    self._queue.remove(pending)
                    raise busy(self._repo.path, self._wait)
            deadline = None  # in a batch already: it ends within the lock's own bound
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def locked(self) -> AbstractContextManager[Lease]:
        """Hold the KB's writer lock: no process moves main meanwhile (to settle a lease from main).

        Raises Busy when the lock is not free within the writer's bound."""
        return kb_lock(self._repo.path, self._wait)

    def propose(self, job: Job, ref: str) -> tuple[str, str | None, object]:
        """Commit `job` on the current head but point only `ref` (never main) at it.

        Raises the job's KBError, or AlreadyExists when `ref` exists.
        """
        with kb_lock(self._repo.path, self._wait) as lease:
            head = self._repo.head()
            tip = self._repo.view(head)
            plan = job(tip)
            _check_plan(plan, tip if head else None)
            if plan.fence is not None:
                plan.fence.check()
            commit, _, objects = self._make_commit(head, tip.tree_id, plan)
            if self._fsync:
                self._flush(objects)
            if not lease.current():
                raise refused(self._repo.path)
            if not self._repo.git.refs.add_if_new(Ref(ref.encode()), ObjectID(commit.encode())):
                raise AlreadyExists(f"{ref} exists already", ref=ref)
            return commit, head, plan.result

    def _lead(self, me: _Pending) -> None:
        """Commit the batches up to the one holding `me` (the first, but for a queue longer than a
        batch), then hand the lead to the first caller still queued."""
        try:
            while not me.finished:
                with self._mutex:
                    batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                try:
                    self._run_batch(batch)
                except BaseException as exc:  # Busy, a bug or an I/O error: fail the batch, keep serving
                    if not isinstance(exc, Busy):
                        log.exception("write batch failed")
                    for p in batch:
                        if not p.finished:
                            p.finish(exc)
        finally:
            with self._mutex:
                if self._queue:
                    self._queue[0].leads = True
                    self._queue[0].wake.set()
                else:
                    self._leading = False

    def _run_batch(self, batch: list[_Pending]) -> None:
        with kb_lock(self._repo.path, self._wait) as lease:
            self._commit_batch(batch, lease)
        for p in batch:
            p.finish()
        written, self._loose_bytes = self._loose_bytes, 0
        self.packer.wrote(sum(1 for p in batch if p.outcome), written)

    def _commit_batch(self, batch: list[_Pending], lease: Lease) -> None:
        deadline = time.monotonic() + self._wait
        while True:
            head = self._repo.head()
            tip, tip_tree = head, self._repo.view(head).tree_id
            written: list[bytes] = []
            outcomes: list[tuple[_Pending, tuple[str, str | None, object] | None, Exception | None]] = []
            for p in batch:
                view = self._repo.tree_view(tip_tree, tip) if tip_tree else self._repo.view(None)
                try:
                    plan = p.job(view)
                    _check_plan(plan, view if tip_tree else None)
                    if plan.fence is not None:
                        plan.fence.check()  # under the writer lock: current until main moves
                    commit, tree_id, objects = self._make_commit(tip, tip_tree, plan)
                except KBError as err:
                    outcomes.append((p, None, err))
                    continue
                except Exception as exc:  # a bug in one job fails its own caller, not the batch
                    log.exception("a write job failed; the other writes of its batch go on")
                    outcomes.append((p, None, exc))
                    continue
                written.extend(objects)
                outcomes.append((p, (commit, tip, plan.result), None))
                tip, tip_tree = commit, tree_id
            if tip != head:
                assert tip is not None
                if not self._move_main(head, tip, written, lease):
                    if not lease.current():  # this process stopped progressing and was taken over
                        raise refused(self._repo.path)
                    if time.monotonic() > deadline:
                        raise busy(self._repo.path, self._wait)
                    time.sleep(0.01)
                    continue  # another process moved main: re-apply the batch on its head
            for p, outcome, failure in outcomes:
                p.outcome, p.error = outcome, failure
            return

    def _put(self, obj: ShaFile) -> None:
        put_loose(self._objects, obj.id.decode("ascii"), lambda: obj.as_legacy_object(self._repo.loose_level))

    def _make_commit(
        self, parent: str | None, tree_id: bytes | None, plan: CommitPlan
    ) -> tuple[str, bytes, list[bytes]]:
        objects: list[bytes] = []
        entries: list[tuple[bytes, bytes | None]] = []
        files = {path for path, data in plan.changes.items() if data is not None}
        for path, data in plan.changes.items():
            if data is None and any(folder in files for folder in parent_dirs(path)):
                continue  # its folder becomes a file: the new blob replaces the whole subtree
            if data is None:
                entries.append((path.encode(), None))
            else:
                blob = Blob.from_string(data)
                self._put(blob)
                self._loose_bytes += len(data)
                objects.append(blob.id)
                entries.append((path.encode(), blob.id))
        # Only the trees along the changed paths are rewritten, each by splicing its few changed
        # entries into its parent version's bytes (store.trees): a folder of 10,000 files costs
        # the same as a folder of ten, but for compressing the bigger object.
        root, made = edit_tree(self._repo.get.tree, tree_id, entries)
        for table in made:
            level = self._repo.big_tree_level if table.size >= BIG_TREE else self._repo.loose_level
            write_loose(self._objects, table, level)
            self._loose_bytes += table.size
            self._repo.get.remember(table)  # the next commit starts from these
            objects.append(table.id)
        commit = Commit()
        commit.tree = ObjectID(root.id)
        commit.parents = [ObjectID(parent.encode())] if parent else []
        author = plan.author.encode()
        commit.author = commit.committer = author
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = _message(plan).encode()
        self._put(commit)
        self._repo.get.remember(commit)  # the next commit starts from this one
        objects.append(commit.id)
        return commit.id.decode(), root.id, objects

    def _flush(self, objects: list[bytes], lock: str | None = None) -> None:
        """Make the loose `objects` durable (fsync of them and their folders), and the bytes of the
        ref's `lock` file in the same round (its name needs no flush: it is renamed next)."""
        paths = [os.path.join(self._objects, sha.decode()[:2], sha.decode()[2:]) for sha in objects]
        paths = [p for p in paths if os.path.exists(p)]  # packed ones need nothing
        sync_files(self._repo.path, paths, nameless=[lock] if lock else [])

    def _move_main(self, old: str | None, new: str, written: list[bytes], lease: Lease) -> bool:
        """Compare-and-swap main from `old` to `new`, making the `written` objects durable first
        (store.refswap). Raises Busy when `lease` was taken over: its token is checked under the ref
        lock, and a stale writer's rename is refused."""
        ref = os.path.join(self._repo.path, MAIN.decode())
        deadline = time.monotonic() + self._wait
        stale = StaleWatch(ref + ".lock")
        flush = (lambda mine: self._flush(written, lock=mine)) if self._fsync else None
        while True:
            try:
                ok = swap_main(ref, self._read_main, old, new, lease, flush)
            except StaleRefWriter:
                raise refused(self._repo.path) from None
            except (RefLocked, FileExistsError):
                # Another program holds main.lock (C git, or a writer whose flock was lost): never
                # remove it while it lives (its rename would fail: 1-5 of 300 racing writes did).
                # Wait for it to go; only one left unchanged for LOCK_STALE_SECONDS is a crash's.
                if stale.stale():
                    log.warning(
                        "KB %s: removing %s.lock, unchanged for %g s (left by a crash)",
                        self._repo.path,
                        ref,
                        LOCK_STALE_SECONDS,
                    )
                    remove_if_same(ref + ".lock", stale.seen)
                elif time.monotonic() > deadline:
                    return False
                else:
                    time.sleep(0.01)
                continue
            if ok and self._fsync:  # the ref file is durable; its rename needs its folder
                self._sync_ref()
            return ok

    def _read_main(self) -> bytes | None:
        refs = self._repo.git.refs
        assert isinstance(refs, DiskRefsContainer)
        current = refs.read_loose_ref(MAIN)
        return current if current is not None else refs.get_packed_refs().get(MAIN)

    def _sync_ref(self) -> None:
        """Flush the folder of main after it moved. Main has moved, so this must not fail the
        writes: a failure is retried once, then logged (the ref file itself was fsynced)."""
        ref = os.path.join(self._repo.path, MAIN.decode())
        for attempt in range(2):
            try:  # only the folder: the bytes were flushed as main.lock, and a rename keeps them
                fsync_path(os.path.dirname(ref))
                return
            except OSError:
                if attempt:
                    log.exception("KB %s: main moved but its folder could not be fsynced", self._repo.path)


def _message(plan: CommitPlan) -> str:
    text = plan.message.strip() or "write"
    fenced = {**plan.fence.trailers, "Kb-Fence": str(plan.fence.token)} if plan.fence else {}
    trailers = {**plan.trailers, **fenced}
    if trailers:
        text += "\n\n" + "\n".join(f"{k}: {v}" for k, v in trailers.items())
    return text + "\n"


def _check_plan(plan: CommitPlan, tip: TreeView | None) -> None:
    """Last guard before git: its own path checks, and never a file over a folder or a folder over a file."""
    for path, data in plan.changes.items():
        encoded = path.encode("utf-8", "surrogateescape")
        if not all(validate_path(encoded, check) for check in _GIT_PATH_CHECKS):
            raise InvalidRequest(
                f"{path} is a name git refuses (an alias of .git); choose another", path=path
            )
        if data is None:
            if tip is None or tip.read(path) is None:
                raise InvalidRequest(f"cannot delete {path}: there is no file there", path=path)
            continue
        if tip is not None and tip.is_dir(path) and not _emptied(tip, path, plan.changes):
            raise InvalidRequest(f"{path} is a folder; choose another file name", path=path)
        for folder in parent_dirs(path):
            if folder in plan.changes:
                stays_file = plan.changes[folder] is not None  # a file deleted in this plan frees its name
            else:
                stays_file = tip is not None and tip.read(folder) is not None
            if stays_file:
                raise InvalidRequest(f"{folder} is a file, so {path} cannot be created", path=path)


def _emptied(tip: TreeView, folder: str, changes: dict[str, bytes | None]) -> bool:
    """Whether `changes` delete every file under `folder` (so a file may take its name)."""
    return all(path in changes and changes[path] is None for path, _ in tip.walk(folder + "/"))
