"""SearchIndex: one Whoosh index per folder with update, atomic rebuild and BM25F search."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from whoosh import query as q
from whoosh.index import EmptyIndexError

from kbserver.index import private, searching, writing
from kbserver.index.bulk import BulkWriter, MergeStopped, MergeWriter
from kbserver.index.document import to_document, valid_utf8
from kbserver.index.merging import merge_small, merge_tail
from kbserver.index.reader import open_searcher, refresh_searcher
from kbserver.index.schema import FORMAT, META_PATH, PATH, SHA, make_schema
from kbserver.index.searching import Hit, SearchResult
from kbserver.index.segments import ReadStorage
from kbserver.index.storage import Folder, IndexCorrupt

__all__ = ["Hit", "IndexCorrupt", "SearchIndex", "SearchResult"]

private.install()  # file names not from the global `random`; a missing length column looked up once

# What reading a damaged index raises (truncated files, bad pickles, missing files), or one whose files a
# rebuild or a merge removed meanwhile; EmptyIndexError is Whoosh's own (not the builtin IndexError):
# its table of contents was already gone.
_READ_ERRORS = (OSError, EOFError, struct.error, ValueError, KeyError, IndexError, TypeError, EmptyIndexError)


@dataclass
class _Reader:
    stamp: tuple[int, int, int]  # of CURRENT when this generation was opened
    ix: Any
    searcher: Any
    versioned: Any = None  # the searcher whose recorded version `version` is (a searcher never changes)
    version: str | None = None


def _no_fence() -> None:
    """The fence of a write nobody fences (tests, `kbserver reindex`)."""


class SearchIndex:
    """A search index in `folder` that records the version it covers.

    Writers (`update`, `rebuild`) are serialised across threads and processes and wait up to
    `lock_timeout` seconds (then TimeoutError). Searches share one searcher, refreshed after changes.
    """

    def __init__(self, folder: Path, *, lock_timeout: float = 60.0) -> None:
        """Open the index in `folder`, creating it if the folder is missing or empty.

        Raises IndexCorrupt if the folder holds anything else or the index cannot be read.
        """
        folder.mkdir(parents=True, exist_ok=True)
        self._folder = Folder(folder)
        self._lock_timeout = lock_timeout
        self._read_lock = threading.Lock()  # one searcher for all threads; Whoosh is GIL-bound anyway
        self._reader: _Reader | None = None
        self._writer_ix: tuple[str, Any] | None = None
        self._closed = False
        self._unmerged = 0  # updates committed without merging since the last merge()
        self._tail_due = False  # a merge(small=True) ran since the last full one
        # (generation folder, Whoosh generation, version) of this object's last commit: while the
        # index is still at that commit, its version needs no searcher (indexed_version).
        self._written: tuple[str, int, str | None] | None = None
        self._disk_bytes = 0  # of the live generation, measured after every change we make
        if self._folder.current() is None:
            if not self._folder.is_empty():
                raise IndexCorrupt(f"{folder} holds files that are not a kbserver index")
            with self._folder.write_lock(self._lock_timeout):
                if self._folder.current() is None:  # another process may have just created it
                    self._build(None, [], None)
        with self._read_lock:
            self._searcher()

    # -- reading ------------------------------------------------------------------------------

    def _open(self) -> _Reader:
        for _ in range(3):
            name = self._folder.current()
            if name is None:
                raise IndexCorrupt(f"{self._folder.root} has no index")
            stamp = self._folder.current_stamp()
            try:
                ix = ReadStorage(str(self._folder.root / name)).open_index(schema=make_schema())
                searcher = open_searcher(ix)
            except Exception as e:  # a rebuild may have swapped and removed it meanwhile: look again
                if self._folder.current() != name:
                    continue
                raise IndexCorrupt(f"index {name} in {self._folder.root} cannot be opened: {e!r}") from e
            try:
                meta = searcher.document(path=META_PATH)
            except _READ_ERRORS as e:
                searcher.close()
                raise IndexCorrupt(f"index {name} in {self._folder.root} cannot be read: {e!r}") from e
            if meta is None or meta.get("format") != FORMAT:
                searcher.close()
                raise IndexCorrupt(f"index {name} in {self._folder.root} is not in format {FORMAT}")
            self._disk_bytes = self._folder.generation_bytes(name)
            return _Reader(stamp, ix, searcher)
        raise IndexCorrupt(f"{self._folder.root} keeps changing generation; cannot open it")

    def _searcher(self) -> Any:
        """The shared searcher, refreshed if the index changed (call with the read lock held)."""
        if self._closed:
            raise RuntimeError("SearchIndex is closed")
        reader = self._reader
        if reader is not None and reader.stamp == self._folder.current_stamp():
            try:
                reader.searcher = refresh_searcher(reader.ix, reader.searcher)
                return reader.searcher
            except _READ_ERRORS:
                pass  # files removed under us (a rebuild, another process's merge): reopen from CURRENT
        new = self._open()
        if reader is not None:
            reader.searcher.close()
        self._reader = new
        return new.searcher

    def indexed_version(self) -> str | None:
        """The version recorded by the last update or rebuild; None for a new index.

        When the index is still at this object's own last commit (no other process wrote since) that
        commit's version, else read from a refreshed searcher: the follower asks before every delta,
        and refreshing a searcher to read the meta document was a good part of a one-file update.
        """
        written, current = self._written, self._writer_ix
        if written is not None and current is not None and current[0] == written[0]:
            if self._folder.current() == written[0] and current[1].latest_generation() == written[1]:
                return written[2]
        with self._read_lock:
            return self._version_of(self._searcher())

    def _version_of(self, searcher: Any) -> str | None:
        """The version `searcher` sees, read once per searcher (call with the read lock held): a
        search read the meta document every time, though only a commit can change it."""
        reader = self._reader
        if reader is not None and reader.versioned is searcher:
            return reader.version
        version = self._version(searcher)
        if reader is not None and reader.searcher is searcher:
            reader.versioned, reader.version = searcher, version
        return version

    @staticmethod
    def _version(searcher: Any) -> str | None:
        meta = searcher.document(path=META_PATH)
        return cast("str | None", meta.get("version")) if meta else None

    def paths(self) -> dict[str, str]:
        """Every indexed path with the sha256 of its indexed text."""
        with self._read_lock:
            reader = self._searcher().reader()
            path_col, sha_col = reader.column_reader(PATH), reader.column_reader(SHA)
            return {path_col[n]: sha_col[n].hex() for n in reader.all_doc_ids() if path_col[n] != META_PATH}

    # -- writing ------------------------------------------------------------------------------

    def _write_index(self) -> Any:
        """The live generation for writing (call with the writer lock held)."""
        name = self._folder.current()
        if name is None:
            raise IndexCorrupt(f"{self._folder.root} has no index")
        if self._writer_ix is None or self._writer_ix[0] != name:
            ix = writing.Storage(str(self._folder.root / name)).open_index(schema=make_schema())
            self._writer_ix = (name, ix)
        return self._writer_ix[1]

    def update(
        self,
        version: str,
        upserts: Mapping[str, str],
        deletes: Iterable[str],
        fence: Callable[[], None] = _no_fence,
    ) -> None:
        """One atomic index commit: delete `deletes`, (re)index `upserts` (path -> text), record `version`.

        A path in both is deleted then indexed. Raises TimeoutError if the writer lock is not acquired.
        `fence` is called under the writer lock right before the commit; what it raises cancels it.
        """
        if self._closed:
            raise RuntimeError("SearchIndex is closed")
        for path in upserts:
            writing.check_path(path)
        docs = [to_document(path, text) for path, text in upserts.items()]  # analysis is outside the lock
        with self._folder.write_lock(self._lock_timeout):
            ix = self._write_index()
            with writing.scratch_in_memory(ix, upserts.values()):
                writer = BulkWriter(ix, timeout=self._lock_timeout)
                generation = writing.apply(writer, version, docs, deletes, upserts, self._docnums, fence)
                assert self._writer_ix is not None
                self._written = (self._writer_ix[0], generation, version)
            self._unmerged += 1
            self._disk_bytes = self._folder.generation_bytes(self._writer_ix[0] if self._writer_ix else None)

    def weight(self) -> int:
        """Roughly the memory this open index holds: Whoosh reads its segment files into memory
        (about 3x the files, docs/performance.md), plus the searcher's state."""
        return 128 * 1024 + 3 * self._disk_bytes

    @property
    def unmerged(self) -> int:
        """Updates this process committed since the last merge()."""
        return self._unmerged

    def merge(self, small: bool = False, stop: Callable[[], bool] | None = None) -> bool:
        """Merge the small segments that updates left into one; True if it ran. `small`: only
        segments of like size (kbserver.index.merging.merge_small), for a pause amid writes.

        `stop()` is asked every few milliseconds of the merge's work; once it says True the merge
        gives up (False) and leaves the index as it was: its segments, version and files.
        """
        if self._closed or (self._unmerged == 0 and (small or not self._tail_due)):
            return False
        with self._folder.write_lock(self._lock_timeout):
            writer = MergeWriter(self._write_index(), timeout=self._lock_timeout, stop=stop)
            try:
                writer.commit(mergetype=merge_small if small else merge_tail)  # no documents: the merge
            except MergeStopped:
                writer.abandon()
                return False
            written, name = self._written, self._writer_ix[0] if self._writer_ix else None
            if written is not None and written[0] == name and written[1] == writer.generation - 1:
                # Ours was the commit before: the version stays.
                self._written = (written[0], int(writer.generation), written[2])
            self._unmerged, self._tail_due = 0, small
            self._disk_bytes = self._folder.generation_bytes(self._writer_ix[0] if self._writer_ix else None)
        return True

    def _docnums(self, writer: Any, paths: list[str]) -> set[int] | None:
        """Document numbers of `paths`, found with the shared searcher; None if it sees other segments.

        Whoosh finds them with a searcher of its own, which opens every segment: most of a one-file
        update of a big index. Under the writer lock nothing else commits, so once our searcher is
        refreshed it numbers documents exactly as the writer does.
        """
        with self._read_lock:
            searcher = self._searcher()
            leaves = searcher.reader().leaf_readers()
            if len(leaves) != len(writer.segments) or any(
                leaf.segment().segment_id() != segment.segment_id()
                or leaf.segment().deleted_count() != segment.deleted_count()
                for (leaf, _), segment in zip(leaves, writer.segments, strict=True)
            ):
                return None
            return {n for path in paths for n in searcher.docs_for_query(q.Term(PATH, path))}

    def rebuild(
        self,
        version: str,
        docs: Iterable[tuple[str, str]],
        progress: Callable[[int], None] | None = None,
        fence: Callable[[], None] = _no_fence,
    ) -> None:
        """Replace the whole index by `docs` (path, text), recording `version`.

        Builds a new generation beside the live one and swaps it in atomically: if `docs` raises or
        the process dies, the old index stays live. `progress(count)` is called every 500 documents.
        `fence` is called under the writer lock right before the swap; what it raises cancels it.
        """
        if self._closed:
            raise RuntimeError("SearchIndex is closed")
        with self._folder.write_lock(self._lock_timeout):
            self._build(version, docs, progress, fence)

    def _build(
        self,
        version: str | None,
        docs: Iterable[tuple[str, str]],
        progress: Callable[[int], None] | None,
        fence: Callable[[], None] = _no_fence,
    ) -> None:
        name, path = self._folder.new_generation()
        try:
            ix, generation, count = writing.build(path, version, docs, progress)
            fence()
            self._folder.publish(name)
        except BaseException:
            self._folder.discard(path)
            raise
        self._writer_ix = (name, ix)
        self._written = (name, generation, version)
        self._folder.remove_others(keep=name)
        self._disk_bytes = self._folder.generation_bytes(name)
        if progress is not None and count % writing.PROGRESS_EVERY:
            progress(count)

    # -- searching ----------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        offset: int = 0,
        prefix: str | None = None,
        filters: Mapping[str, str] | None = None,
        snippets: bool = True,
        coverage: bool = False,
        stepping: bool = False,
        hide: searching.Hide | None = None,
    ) -> SearchResult:
        """Rank files for `query` (BM25F), optionally only under `prefix` and with exact field `filters`.

        The words are ORed: files with every word rank first, then files with the words as a phrase
        above those (see query.py); "quoted phrases" must occur; -word excludes. An empty query
        lists the files passing prefix and filters, in path order. Never raises on query syntax.
        `total` is the exact number of matches. Without `snippets` hits carry neither a snippet nor
        fields ("" and {}: both are read from the stored fields, one read per hit). With `coverage`
        each hit carries its `coverage` (what `coverage()` says of its path, from the same read).
        `stepping` ranks with the reference collector (collect.py), which steps every match in
        Python, instead of over arrays (arrays.py): the same hits, order, scores and total, slower.
        `hide` = (folder, key, values) leaves out, from the hits and the total, the files under
        `folder` whose filter field `key` is one of `values` (other agents' private memories).
        """
        limit, offset = max(0, limit), max(0, offset)
        query = valid_utf8(query)
        within, possible = searching.constraint(prefix, filters)
        hidden = searching.hidden(hide)
        with self._read_lock:
            searcher = self._searcher()
            version = self._version_of(searcher)
            if not possible:
                return SearchResult([], 0, version)
            return searching.search(
                searcher,
                version,
                query,
                limit=limit,
                offset=offset,
                within=within,
                hide=hidden,
                snippets=snippets,
                coverage=coverage,
                stepping=stepping,
            )

    def coverage(self, query: str, paths: Collection[str]) -> dict[str, float]:
        """For each indexed file of `paths`, the share of `query`'s words it holds, each word weighted
        by its rarity (BM25's idf): 1.0 for a file holding every word, 0.0 for one holding none.

        Unlike a BM25 score it is absolute, so it can be compared between questions and fused with
        a cosine: one common word in common is weak evidence, every rare word of the question strong.
        Document frequencies count live documents only, so the value does not move when the index
        merges its segments.
        """
        query = valid_utf8(query)
        with self._read_lock:
            return searching.coverage(self._searcher(), query, paths)

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the searcher; the object cannot be used afterwards."""
        with self._read_lock:
            if self._reader is not None:
                self._reader.searcher.close()
                self._reader = None
            self._writer_ix = None
            self._closed = True

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
