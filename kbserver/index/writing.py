"""Writing an index generation: applying one delta in a Whoosh writer, and building a whole new index.

SearchIndex (engine.py) takes the writer lock, picks the generation and records what it committed;
what is written, and how, is here.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from whoosh.filedb.filestore import FileStorage, RamStorage

from kbserver.index.bulk import BulkWriter
from kbserver.index.document import meta_document, to_document, valid_utf8
from kbserver.index.schema import META_PATH, PATH, make_schema

__all__ = [
    "PROGRESS_EVERY",
    "SMALL_UPDATE_BYTES",
    "Storage",
    "apply",
    "build",
    "check_path",
    "scratch_in_memory",
]

PROGRESS_EVERY = 500
# An update whose texts are smaller than this keeps Whoosh's scratch files in memory (the posting
# pool and the stored fields before they are assembled): a folder made and removed, and a dozen
# files opened, per one-file update cost more than the update itself.
SMALL_UPDATE_BYTES = 4 << 20


class Storage(FileStorage):  # type: ignore[misc]
    """An index generation's folder; `scratch_in_memory` while a small update writes (writer lock held)."""

    scratch_in_memory = False

    def temp_storage(self, name: str | None = None) -> Any:
        return RamStorage() if self.scratch_in_memory else super().temp_storage(name)


@contextlib.contextmanager
def scratch_in_memory(ix: Any, texts: Iterable[str]) -> Iterator[None]:
    """While writing `texts` to `ix`, keep Whoosh's scratch files in memory if they are small."""
    storage = ix.storage if isinstance(ix.storage, Storage) else None
    if storage is not None:
        storage.scratch_in_memory = sum(len(text) for text in texts) < SMALL_UPDATE_BYTES
    try:
        yield
    finally:
        if storage is not None:
            storage.scratch_in_memory = False


def check_path(path: str) -> None:
    """Raise ValueError for a path no document may have."""
    if not path or "\x00" in path or valid_utf8(path) != path:
        raise ValueError(f"not an indexable path: {path!r}")


def apply(
    writer: Any,
    version: str,
    docs: list[dict[str, Any]],
    deletes: Iterable[str],
    upserts: Mapping[str, str],
    docnums: Callable[[Any, list[str]], set[int] | None],
    fence: Callable[[], None],
) -> int:
    """Delete `deletes` and `upserts`' old documents, add `docs` and the meta document of `version`,
    and commit `writer` (the writer lock held); the generation it committed.

    `docnums(writer, paths)` finds the documents of `paths` cheaply, or says None (then Whoosh finds
    them itself). `fence` is called right before the commit; what it raises cancels it.
    """
    try:
        paths = [p for p in itertools.chain(deletes, upserts, [META_PATH]) if valid_utf8(p) == p]
        doomed = docnums(writer, paths)
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
    # No merging on the write path: merges of piled-up small segments made updates slow now and then
    # (docs/performance.md). SearchIndex.merge does it when the indexer is idle.
    writer.commit(merge=False)
    return int(writer.generation)


def build(
    path: Path, version: str | None, docs: Iterable[tuple[str, str]], progress: Callable[[int], None] | None
) -> tuple[Any, int, int]:
    """A new index in the empty folder `path` of `docs` (path, text) recording `version`: the index,
    its generation and the number of documents. `progress(count)` is called every 500 documents."""
    ix = Storage(str(path)).create_index(make_schema())
    writer = BulkWriter(ix)
    count = 0
    seen: set[str] = set()
    try:
        for doc_path, text in docs:
            check_path(doc_path)
            if doc_path in seen:
                raise ValueError(f"duplicate path in rebuild: {doc_path!r}")
            seen.add(doc_path)
            writer.add_document(**to_document(doc_path, text))
            count += 1
            if progress is not None and count % PROGRESS_EVERY == 0:
                progress(count)
        writer.add_document(**meta_document(version))
    except BaseException:
        writer.cancel()
        raise
    writer.commit()
    return ix, int(writer.generation), count
