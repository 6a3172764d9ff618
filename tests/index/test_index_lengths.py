"""A segment's missing length columns are looked for once, not once per document or posting.

Whoosh's `W3PerDocReader` cached the columns it found and asked the storage again, a `stat` each,
for every field without lengths (path, folders, filters) on every call: ~130,000 times in a merge
of 40 small segments. `kbserver.index.private` remembers the miss; the answers stay the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from whoosh.filedb.filestore import FileStorage
from whoosh.reading import SegmentReader

from kbserver.index import SearchIndex, private
from kbserver.index.schema import PATH

DOCS = {f"notes/n{i}.md": f"# note {i}\n\nkestrel harrier number{i}\n" for i in range(6)}


def _segment_reader(ix: SearchIndex) -> Any:
    writer_ix = ix._write_index()
    segment = private.read_toc(writer_ix).segments[0]
    return SegmentReader(writer_ix.storage, writer_ix.schema, segment)


def test_a_field_without_lengths_is_looked_for_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ix = SearchIndex(tmp_path / "ix")
    ix.rebuild("v1", DOCS.items())
    reader = _segment_reader(ix)
    looks: list[str] = []
    real = FileStorage.file_exists

    def file_exists(self: FileStorage, name: str) -> bool:
        looks.append(name)
        return bool(real(self, name))

    monkeypatch.setattr(FileStorage, "file_exists", file_exists)
    lengths = [reader.doc_field_length(n, PATH) for n in range(reader.doc_count_all())]
    assert lengths == [0] * len(lengths)  # the path field is not scored: no lengths, as before
    assert len(looks) <= 1  # one look for the column (a compound segment asks no file at all)
    body = [reader.doc_field_length(n, "body") for n in range(reader.doc_count_all())]
    assert body == [reader.doc_field_length(n, "body") for n in range(reader.doc_count_all())]
    assert any(body)  # a scored field still has its lengths
    reader.close()
    ix.close()


def test_merged_segments_search_as_before(tmp_path: Path) -> None:
    ix = SearchIndex(tmp_path / "ix")
    ix.rebuild("v0", [])
    for i, (path, text) in enumerate(DOCS.items()):
        ix.update(f"v{i + 1}", {path: text}, [])
    before = [(h.path, round(h.score, 6)) for h in ix.search("kestrel number3", limit=10).hits]
    assert ix.merge()
    after = [(h.path, round(h.score, 6)) for h in ix.search("kestrel number3", limit=10).hits]
    assert after == before and len(after) == len(DOCS)
    assert ix.paths().keys() == DOCS.keys()
    ix.close()
