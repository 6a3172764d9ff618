"""The bulk rebuild (index/bulk.py, the fast fields of index/schema.py) against Whoosh's own way.

- the fast analysis gives every field the postings Whoosh's analyzer pipeline gives (hypothesis);
- a segment built by BulkWriter holds the same terms, postings (documents, weights, encoded
  positions), field lengths and stored fields as one built by Whoosh's SegmentWriter through the
  plain analyzer pipeline;
- a KB's index rebuilt in one go answers every search exactly as the same files indexed
  incrementally, a few per update, the way the follower indexes commits.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from whoosh import fields
from whoosh import index as whoosh_index

from kbserver.index import SearchIndex
from kbserver.index.bulk import BulkWriter
from kbserver.index.document import to_document
from kbserver.index.schema import make_schema

SAMPLE = Path(__file__).parents[2] / "sample_kb"
_EN = (
    "the a of and running runs ran runner agent memory notes Git commit deploy server review "
    "C 3 x42 QS-231 naïve café Straße ﬁne Ⅻ snake_case "
    "\uff26\uff35\uff2c\uff2c \uff57\uff49\uff44\uff54\uff48"  # full-width FULL width
).split()
_ZH = [
    "咖啡",
    "美式",
    "用户",
    "喜欢",
    "提交",
    "信息",
    "我",
    "团队约定",
    "テスト",
    "ー",
    "한국어",
    "\U00020000",
]


def _text(rng: random.Random, words: int) -> str:
    out = []
    for _ in range(words):
        out.append(rng.choice(_ZH) if rng.random() < 0.3 else rng.choice(_EN))
        out.append(rng.choice([" ", " ", "", ", ", ".\n", "\n\n- "]))
    return "".join(out)


def corpus(n: int = 240, seed: int = 5) -> list[tuple[str, str]]:
    """The sample KB's notes and `n` generated ones: front matter or not, English, CJK, mixed."""
    docs = [(str(p.relative_to(SAMPLE)), p.read_text(encoding="utf-8")) for p in sorted(SAMPLE.rglob("*.md"))]
    rng = random.Random(seed)
    for i in range(n):
        body = _text(rng, rng.choice([0, 1, 3, 12, 40, 150]))
        if i % 3:
            tags = ", ".join(rng.sample(["git", "tea", "团队", "ops", "x"], rng.randint(1, 3)))
            title = _text(rng, rng.randint(1, 5)).replace("\n", " ").strip() or "t"
            body = f"---\ntitle: {title!r}\ntags: [{tags}]\ncategory: c{i % 4}\n---\n{body}"
        if i % 17 == 0:
            body = "word" * 20 + " " + body  # longer than the longest indexed word
        docs.append((f"d{i % 4}/e{i % 3}/n{i:03d}.md", body))
    return docs


# -- the fast fields against Whoosh's analyzer pipeline -------------------------------------------------


def _plain(schema: Any) -> Any:
    """`schema` with its fast text fields turned back into Whoosh's TEXT (the analyzer pipeline)."""
    for name in schema.names():
        if isinstance(schema[name], fields.TEXT):
            schema[name].__class__ = fields.TEXT
    return schema


_SCHEMA = make_schema()
_TEXT_FIELDS = [n for n in _SCHEMA.names() if isinstance(_SCHEMA[n], fields.TEXT)]
_ALPHABET = st.sampled_from([*_EN, *_ZH, " ", "\n", "_", "-", "'", "İ", "ǅ", "㍿", "ｶ", "…", "0"])


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_fast_fields_index_as_the_analyzer_pipeline(text: str) -> None:
    assert {"body", "title", "chars", "path_text"} <= set(_TEXT_FIELDS)
    for name in _TEXT_FIELDS:
        field = _SCHEMA[name]
        assert type(field) is not fields.TEXT  # the fast path is what the schema uses
        assert sorted(field.index(text)) == sorted(fields.TEXT.index(field, text)), name


def test_fast_fields_on_the_corpus() -> None:
    for _, text in corpus():
        doc = to_document("a/b.md", text)
        for name in _TEXT_FIELDS:
            if name in doc:
                field = _SCHEMA[name]
                assert sorted(field.index(doc[name])) == sorted(fields.TEXT.index(field, doc[name]))


# -- a bulk segment against Whoosh's SegmentWriter ----------------------------------------------------------


def _build(folder: Path, bulk: bool, docs: list[tuple[str, str]]) -> Any:
    folder.mkdir()
    ix = whoosh_index.create_in(str(folder), make_schema() if bulk else _plain(make_schema()))
    writer = BulkWriter(ix) if bulk else ix.writer()
    for path, text in docs:
        writer.add_document(**to_document(path, text))
    writer.commit()
    return ix


def _contents(ix: Any) -> Iterator[Any]:
    with ix.reader() as reader:
        yield reader.doc_count_all()
        for field, text in reader.all_terms():
            yield field, text, reader.doc_frequency(field, text), reader.frequency(field, text)
            matcher = reader.postings(field, text)
            yield [(docnum, matcher.weight(), value) for docnum, value in matcher.all_items()]
        for name in reader.indexed_field_names():
            yield name, [reader.doc_field_length(n, name) for n in range(reader.doc_count_all())]
            if reader.schema[name].scorable:
                yield reader.min_field_length(name), reader.max_field_length(name), reader.field_length(name)
        yield list(reader.all_stored_fields())


def test_a_bulk_segment_equals_whooshs(tmp_path: Path) -> None:
    docs = corpus()
    bulk, plain = _build(tmp_path / "bulk", True, docs), _build(tmp_path / "plain", False, docs)
    try:
        got, want = list(_contents(bulk)), list(_contents(plain))
        assert len(got) > 1000  # terms were compared, not two empty lists
        assert got == want
    finally:
        bulk.close()
        plain.close()


# -- rebuild against incremental updates, through SearchIndex ---------------------------------------------


def _queries(docs: list[tuple[str, str]]) -> list[str]:
    rng = random.Random(9)
    words = [w for _, t in docs for w in t.split()][:4000]
    picked = rng.sample(words, 60) + [" ".join(rng.sample(words, 3)) for _ in range(20)]
    return [*picked, *_ZH, "咖", "running", '"团队 约定"', "git -tea", "the", "Quayside deploy", "xyz"]


@pytest.mark.parametrize("per_update", [1, 7])
def test_a_rebuild_answers_as_incremental_updates(tmp_path: Path, per_update: int) -> None:
    docs = corpus()
    rebuilt, updated = SearchIndex(tmp_path / "rebuilt"), SearchIndex(tmp_path / "updated")
    try:
        rebuilt.rebuild("v1", iter(docs))
        for start in range(0, len(docs), per_update):
            updated.update(f"u{start}", dict(docs[start : start + per_update]), [])
            if start % (per_update * 10) == 0:
                updated.merge()  # as the follower leaves it: some segments merged, some not
        updated.update("v1", {}, [])
        assert rebuilt.paths() == updated.paths() and len(rebuilt.paths()) == len(docs)
        assert rebuilt.indexed_version() == updated.indexed_version() == "v1"
        answered = 0
        for query in _queries(docs):
            for options in ({}, {"prefix": "d1/"}, {"filters": {"tags": "git"}}, {"limit": 3, "offset": 2}):
                a = rebuilt.search(query, **options)  # type: ignore[arg-type]
                b = updated.search(query, **options)  # type: ignore[arg-type]
                assert a.total == b.total, (query, options)
                assert [(h.path, round(h.score, 6), h.snippet, h.fields) for h in a.hits] == [
                    (h.path, round(h.score, 6), h.snippet, h.fields) for h in b.hits
                ], (query, options)
                answered += bool(a.hits)
            assert rebuilt.coverage(query, [p for p, _ in docs[:50]]) == updated.coverage(
                query, [p for p, _ in docs[:50]]
            )
        assert answered > 100  # most queries find something
    finally:
        rebuilt.close()
        updated.close()
