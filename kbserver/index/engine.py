"""SearchIndex: one Whoosh index per folder with update, atomic rebuild and BM25F search."""

from __future__ import annotations

import itertools
import math
import re
import struct
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import numpy as np
from whoosh import query as q
from whoosh.filedb.filestore import FileStorage, RamStorage
from whoosh.index import EmptyIndexError

from kbserver.index import private
from kbserver.index.arrays import collect_arrays, doc_ids
from kbserver.index.bulk import BulkWriter
from kbserver.index.codec import CODEC
from kbserver.index.collect import collect
from kbserver.index.document import meta_document, to_document, valid_utf8
from kbserver.index.merging import merge_small, merge_tail
from kbserver.index.query import parse_query, question_words, word_query
from kbserver.index.reader import open_searcher, refresh_searcher
from kbserver.index.schema import DIRS, FIELDS, FILTER_PREFIX, FORMAT, META_PATH, PATH, SHA, make_schema
from kbserver.index.snippet import Snippet, make_snippet
from kbserver.index.storage import Folder, IndexCorrupt

__all__ = ["Hit", "IndexCorrupt", "SearchIndex", "SearchResult"]

private.install()  # file names not from the global `random`; a missing length column looked up once

_PROGRESS_EVERY = 500
_FILTER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
# What reading a damaged index raises (truncated files, bad pickles, missing files).
# What reading an index whose files a rebuild or a merge removed meanwhile raises; EmptyIndexError is
# Whoosh's own (not the builtin IndexError): its table of contents was already gone.
_READ_ERRORS = (OSError, EOFError, struct.error, ValueError, KeyError, IndexError, TypeError, EmptyIndexError)


@dataclass(frozen=True)
class Hit:
    """One matching file."""

    path: str
    score: float
    snippet: str  # plain-text excerpt around the matches; the start of the body when nothing to highlight
    fields: dict[str, str]  # front-matter fields: title, tags (joined by ", "), category and other scalars
    coverage: float | None = None  # with search(coverage=True): the share of the question's words held
    highlights: tuple[tuple[int, int], ...] = ()  # [start, end) of the matched words in `snippet`


@dataclass(frozen=True)
class SearchResult:
    """A page of hits, the number of all matches and the version the index covered."""

    hits: list[Hit]
    total: int
    version: str | None


@dataclass
class _Reader:
    stamp: tuple[int, int, int]  # of CURRENT when this generation was opened
    ix: Any
    searcher: Any
    versioned: Any = None  # the searcher whose recorded version `version` is (a searcher never changes)
    version: str | None = None


# An update whose texts are smaller than this keeps Whoosh's scratch files in memory (the posting
# pool and the stored fields before they are assembled): a folder made and removed, and a dozen
# files opened, per one-file update cost more than the update itself.
_SMALL_UPDATE_BYTES = 4 << 20


class _Storage(FileStorage):  # type: ignore[misc]
    """An index generation's folder; `scratch_in_memory` while a small update writes (writer lock held)."""

    scratch_in_memory = False

    def temp_storage(self, name: str | None = None) -> Any:
        return RamStorage() if self.scratch_in_memory else super().temp_storage(name)


def _no_fence() -> None:
    """The fence of a write nobody fences (tests, `kbserver reindex`)."""


def _has(reader: Any) -> Callable[[str, str], bool]:
    """Whether the index holds a term, each asked once (a question asks for its words ~3 times)."""
    known: dict[tuple[str, str], bool] = {}

    def has(field: str, text: str) -> bool:
        found = known.get((field, text))
        if found is None:
            found = known[(field, text)] = (field, text) in reader
        return found

    return has


def _shares(
    searcher: Any, words: tuple[str, ...], docnums: list[int], has: Callable[[str, str], bool]
) -> dict[int, float]:
    """For each document of `docnums`, the idf-weighted share of `words` it holds (SearchIndex.coverage)."""
    if not docnums or not words:
        return dict.fromkeys(docnums, 0.0)
    live = searcher.doc_count()
    asked = np.array(docnums, dtype=np.int64)
    held = np.zeros(len(asked), dtype=np.float64)
    weight = 0.0
    for word in words:
        found = doc_ids(searcher, word_query(word, has))
        idf = math.log(1.0 + (live - len(found) + 0.5) / (len(found) + 0.5))
        weight += idf
        held += np.where(np.isin(asked, found), idf, 0.0)  # + 0.0 where not held: the same sums
    return dict(zip(docnums, (held / weight).tolist(), strict=True))


def _check_path(path: str) -> None:
    if not path or "\x00" in path or valid_utf8(path) != path:
        raise ValueError(f"not an indexable path: {path!r}")


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
                ix = FileStorage(str(self._folder.root / name)).open_index(schema=make_schema())
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
        and the refresh plus the meta document cost ~2 ms of a one-file update.
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
            ix = _Storage(str(self._folder.root / name)).open_index(schema=make_schema())
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
            _check_path(path)
        docs = [to_document(path, text) for path, text in upserts.items()]  # analysis is outside the lock
        small = sum(len(text) for text in upserts.values()) < _SMALL_UPDATE_BYTES
        with self._folder.write_lock(self._lock_timeout):
            ix = self._write_index()
            storage = ix.storage if isinstance(ix.storage, _Storage) else None
            if storage is not None:
                storage.scratch_in_memory = small
            try:
                writer = ix.writer(timeout=self._lock_timeout, codec=CODEC)
                generation = self._update(writer, version, docs, deletes, upserts, fence)
                assert self._writer_ix is not None
                self._written = (self._writer_ix[0], generation, version)
            finally:
                if storage is not None:
                    storage.scratch_in_memory = False
            self._unmerged += 1
            self._disk_bytes = self._folder.generation_bytes(self._writer_ix[0] if self._writer_ix else None)

    def _update(
        self,
        writer: Any,
        version: str,
        docs: list[dict[str, Any]],
        deletes: Iterable[str],
        upserts: Mapping[str, str],
        fence: Callable[[], None],
    ) -> int:
        """Delete, add and commit in `writer` (the writer lock held); the generation it committed."""
        try:
            paths = [p for p in itertools.chain(deletes, upserts, [META_PATH]) if valid_utf8(p) == p]
            doomed = self._docnums(writer, paths)
            if doomed is None:
                with writer.searcher() as searcher:
                    for path in paths:
                        writer.delete_by_term(PATH, path, searcher=searcher)
            else:
                for docnum in doomed:
                    writer.delete_document(docnum)
            for doc in docs:
                writer.add_document(**doc)
            writer.add_document(**meta_document(version))
            fence()
        except BaseException:
            writer.cancel()
            raise
        # No merging on the write path: merges of piled-up small segments made every ~5th update
        # slow (p95 ~60 ms at 10k). `merge()` does it when the indexer is idle.
        writer.commit(merge=False)
        return int(writer.generation)

    def weight(self) -> int:
        """Roughly the memory this open index holds: Whoosh reads its segment files into memory
        (measured: ~1 MB for 1,000 short notes, about 3x the files), plus the searcher's state."""
        return 128 * 1024 + 3 * self._disk_bytes

    @property
    def unmerged(self) -> int:
        """Updates this process committed since the last merge()."""
        return self._unmerged

    def merge(self, small: bool = False) -> bool:
        """Merge the small segments that updates left into one; True if it ran. `small`: only
        segments of like size (kbserver.index.merging.merge_small), for a pause amid writes."""
        if self._closed or (self._unmerged == 0 and (small or not self._tail_due)):
            return False
        with self._folder.write_lock(self._lock_timeout):
            writer = self._write_index().writer(timeout=self._lock_timeout, codec=CODEC)
            writer.commit(mergetype=merge_small if small else merge_tail)  # no documents: only the merge
            written, name = self._written, self._writer_ix[0] if self._writer_ix else None
            if written is not None and written[0] == name and written[1] == writer.generation - 1:
                # Ours was the commit before: the version stays.
                self._written = (written[0], int(writer.generation), written[2])
            self._unmerged, self._tail_due = 0, small
            self._disk_bytes = self._folder.generation_bytes(self._writer_ix[0] if self._writer_ix else None)
        return True

    def _docnums(self, writer: Any, paths: list[str]) -> set[int] | None:
        """Document numbers of `paths`, found with the shared searcher; None if it sees other segments.

        Whoosh finds them with a searcher of its own, which opens every segment: ~45 ms of a 55 ms
        one-file update at 100k documents. Under the writer lock nothing else commits, so once our
        searcher is refreshed it numbers documents exactly as the writer does.
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
            ix = _Storage(str(path)).create_index(make_schema())
            writer = BulkWriter(ix)
            count = 0
            seen: set[str] = set()
            try:
                for doc_path, text in docs:
                    _check_path(doc_path)
                    if doc_path in seen:
                        raise ValueError(f"duplicate path in rebuild: {doc_path!r}")
                    seen.add(doc_path)
                    writer.add_document(**to_document(doc_path, text))
                    count += 1
                    if progress is not None and count % _PROGRESS_EVERY == 0:
                        progress(count)
                writer.add_document(**meta_document(version))
            except BaseException:
                writer.cancel()
                raise
            writer.commit()
            generation = int(writer.generation)
            fence()
            self._folder.publish(name)
        except BaseException:
            self._folder.discard(path)
            raise
        self._writer_ix = (name, ix)
        self._written = (name, generation, version)
        self._folder.remove_others(keep=name)
        self._disk_bytes = self._folder.generation_bytes(name)
        if progress is not None and count % _PROGRESS_EVERY:
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
        hide: tuple[str, str, Collection[str]] | None = None,
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
        constraint, possible = self._constraint(prefix, filters)
        hidden = self._hidden(hide)
        with self._read_lock:
            searcher = self._searcher()
            version = self._version_of(searcher)
            if not possible:
                return SearchResult([], 0, version)
            if not query.strip():
                if hidden is not None:
                    listed = (
                        constraint if constraint is not None else q.AndNot(q.Every(), q.Term(PATH, META_PATH))
                    )
                    constraint = q.AndNot(listed, hidden)
                return self._list(searcher, constraint, limit, offset, version)
            has = _has(searcher.reader())
            parsed = parse_query(query, has)
            if parsed.match is None:
                return SearchResult([], 0, version)
            exclude = parsed.exclude
            if hidden is not None:
                exclude = hidden if exclude is None else q.Or([exclude, hidden])
            # Our own collectors: Whoosh's skips by quality and breaks under the restriction (collect.py).
            if stepping:
                full = parsed.match if constraint is None else q.Require(parsed.match, constraint)
                ranked, total = self._stepping(searcher, full, offset + limit, parsed, exclude)
            else:
                ranked, total = collect_arrays(
                    searcher, parsed.match, offset + limit, parsed.tiers, exclude, PATH, constraint
                )
            page = ranked[offset : offset + limit]
            shares = _shares(searcher, parsed.words, [d for _, d, _ in page], has) if coverage else {}
            hits = []
            for score, docnum, path in page:
                if snippets:
                    stored = searcher.stored_fields(docnum)
                    snippet = make_snippet(stored.get("body", ""), parsed.highlight)
                    fields = dict(stored.get(FIELDS) or {})
                else:
                    snippet, fields = Snippet("", ()), {}
                share = shares.get(docnum) if coverage else None
                hits.append(Hit(path, score, snippet.text, fields, share, snippet.highlights))
            return SearchResult(hits, total, version)

    @staticmethod
    def _stepping(
        searcher: Any, full: Any, limit: int, parsed: Any, exclude: Any | None
    ) -> tuple[list[tuple[float, int, str]], int]:
        tiers: list[frozenset[int]] = []
        for tier in parsed.tiers:  # each tier lies within the one before: stop at the first empty one
            docs = frozenset(searcher.docs_for_query(tier))
            if not docs:
                break
            tiers.append(docs)
        excluded = frozenset(searcher.docs_for_query(exclude)) if exclude is not None else frozenset()
        ranked, total = collect(searcher, full, limit, tiers, excluded, key=PATH)
        return [(score, d, searcher.stored_fields(d)[PATH]) for score, d in ranked], total

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
            searcher = self._searcher()
            numbers: dict[int, str] = {}
            for path in paths:
                number = searcher.document_number(**{PATH: path})
                if number is not None:
                    numbers[number] = path
            shares = _shares(searcher, question_words(query), list(numbers), _has(searcher.reader()))
            return {path: shares[number] for number, path in numbers.items()}

    @staticmethod
    def _hidden(hide: tuple[str, str, Collection[str]] | None) -> Any | None:
        """The files `search`'s `hide` names, as one query (None: nothing to hide)."""
        if hide is None:
            return None
        folder, key, values = hide
        terms = [q.Term(FILTER_PREFIX + key, valid_utf8(v)) for v in sorted(values) if v]
        if not terms or _FILTER_KEY.match(key) is None:
            return None
        return q.And([q.Term(DIRS, valid_utf8(folder)), q.Or(terms)])

    @staticmethod
    def _constraint(prefix: str | None, filters: Mapping[str, str] | None) -> tuple[Any | None, bool]:
        """The prefix and filters as one query (None: no constraint); False if nothing can match."""
        parts: list[Any] = []
        if prefix:
            prefix = valid_utf8(prefix)
            if "\x00" in prefix:
                return None, False
            # A folder prefix is a single term of DIRS; any other prefix expands over matching paths.
            parts.append(q.Term(DIRS, prefix) if prefix.endswith("/") else q.Prefix(PATH, prefix))
        for key, value in (filters or {}).items():
            if _FILTER_KEY.match(key) is None or not value:
                return None, False
            parts.append(q.Term(FILTER_PREFIX + key, valid_utf8(value)))
        if not parts:
            return None, True
        return (parts[0] if len(parts) == 1 else q.And(parts)), True

    @staticmethod
    def _list(
        searcher: Any, constraint: Any | None, limit: int, offset: int, version: str | None
    ) -> SearchResult:
        # The meta document has no prefix or filter terms, but Every() would match it.
        listing = constraint if constraint is not None else q.AndNot(q.Every(), q.Term(PATH, META_PATH))
        results = searcher.search(listing, limit=max(1, offset + limit), sortedby=PATH)
        hits = [
            Hit(
                path=hit[PATH],
                score=0.0,
                snippet=make_snippet(hit.get("body", ""), frozenset()).text,
                fields=dict(hit.get(FIELDS) or {}),
            )
            for hit in results[offset : offset + limit]
        ]
        return SearchResult(hits, len(results), version)

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
