"""kbserver.index.bulk.MergeWriter: a merge writes the segment Whoosh's own add_reader would write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index

from kbserver.index.bulk import MergeWriter
from kbserver.index.codec import CODEC
from kbserver.index.document import to_document
from kbserver.index.merging import merge_small, merge_tail
from kbserver.index.schema import make_schema

_HAN = [chr(0x4E00 + k * 13) for k in range(60)]


def _text(i: int) -> str:
    """Half Chinese (rare bigrams), half English, a few words common to many notes."""
    if i % 2:
        return "".join(_HAN[(i * 7 + k * k) % len(_HAN)] for k in range(30)) + f"。共同 walrus{i % 3}"
    return f"walrus kiwi note{i} " + " ".join(f"word{(i * k) % 17}" for k in range(12))


def _build(folder: Path, deleted: set[int]) -> Any:
    """Five segments of 30 notes (the first 200 kiwis long, for blocks of many postings), then
    `deleted` (by path) removed: the same index each call."""
    ix = whoosh_index.create_in(str(folder), make_schema())
    n = 0
    for seg in range(5):
        with ix.writer(codec=CODEC) as w:
            w.merge = False
            for _ in range(200 if seg == 0 else 30):
                w.add_document(**to_document(f"s{seg}/n{n}.md", _text(n)))
                n += 1
    if deleted:
        with ix.writer(codec=CODEC) as w:
            w.merge = False
            for d in deleted:
                w.delete_by_term("path", f"s{0 if d < 200 else (d - 200) // 30 + 1}/n{d}.md")
    return ix


def _contents(ix: Any) -> dict[str, Any]:
    """Everything a search reads of an index, through Whoosh's public API, by path."""
    with ix.searcher() as s:
        r = s.reader()
        path_of = {d: f["path"] for d, f in r.iter_docs()}
        postings = sorted((f, t, path_of[d], w, v) for f, t, d, w, v in r.iter_postings())
        fields = sorted({f for f, *_ in postings})
        stats = {
            (f, t): (
                r.doc_frequency(f, t),
                r.frequency(f, t),
                r.term_info(f, t).min_length(),
                r.term_info(f, t).max_length(),
                r.term_info(f, t).max_weight(),
            )
            for f, t in r.all_terms()
        }
        return {
            "docs": r.doc_count(),
            "segments": len(ix._segments()),
            "stored": sorted((path_of[d], sorted(f.items())) for d, f in r.iter_docs()),
            "lengths": sorted((path_of[d], f, r.doc_field_length(d, f)) for d in path_of for f in fields),
            "field_lengths": [
                (r.field_length(f), r.max_field_length(f)) for f in fields if r.schema[f].scorable
            ],
            "postings": postings,
            "stats": stats,
        }


@pytest.mark.parametrize("deleted", [set(), {0, 5, 130, 201, 202, 230, 299, 319}])
@pytest.mark.parametrize("policy", [merge_tail, merge_small])
def test_a_merge_writes_what_whooshs_own_writer_writes(
    tmp_path: Path, deleted: set[int], policy: Any
) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "whoosh").mkdir()
    ours, whooshs = _build(tmp_path / "ours", deleted), _build(tmp_path / "whoosh", deleted)
    try:
        assert _contents(ours) == _contents(whooshs)
        MergeWriter(ours).commit(mergetype=policy)
        whooshs.writer(codec=CODEC).commit(mergetype=policy)
        merged = _contents(ours)
        assert merged == _contents(whooshs)
        assert merged["segments"] < 6 and merged["docs"] == 320 - len(deleted)
    finally:
        ours.close()
        whooshs.close()


def test_a_term_only_deleted_documents_held_is_gone(tmp_path: Path) -> None:
    ix = whoosh_index.create_in(str(tmp_path), make_schema())
    try:
        for text in ("walrus only", "kiwi", "kiwi again"):
            with ix.writer(codec=CODEC) as w:
                w.merge = False
                w.add_document(**to_document(f"{text.replace(' ', '_')}.md", text))
        with ix.writer(codec=CODEC) as w:
            w.merge = False
            w.delete_by_term("path", "walrus_only.md")
        MergeWriter(ix).commit(mergetype=merge_tail)
        with ix.reader() as r:
            assert ("body", b"walrus") not in r
            assert r.doc_frequency("body", b"kiwi") == 2 and r.doc_count_all() == 2
    finally:
        ix.close()
