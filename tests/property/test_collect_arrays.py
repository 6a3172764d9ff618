"""Differential test: ranking over arrays (index/arrays.py) returns exactly what stepping every match
(index/collect.py, the reference) returns: the same hits in the same order with the same scores,
the same snippets and fields, the same exact total, at every limit and offset.

Random corpora (English, Chinese, mixed; front matter with titles, tags and categories; words
repeated; sometimes copied out to hundreds of files so postings span several blocks) written in
several segments with files replaced and deleted, sometimes merged; random queries (questions,
Chinese, quoted phrases, -exclusions, junk) with random prefixes and filters. Bounded and
derandomized, so a landing never meets a new example.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Mapping
from pathlib import Path

from hypothesis import given, note, settings
from hypothesis import strategies as st

from kbserver.index import SearchIndex
from tests.search_model import EN, PREFIXES, ZH, make_corpus, queries, render

_KINDS = ("en", "zh", "mixed")
_CATEGORIES = ("work", "home", "旅行")


def _with_front_matter(rng: random.Random, docs: dict[str, str]) -> dict[str, str]:
    out = {}
    for path, text in docs.items():
        if rng.random() < 0.4:
            title = " ".join(rng.choice(EN + ZH) for _ in range(rng.randint(1, 3)))
            tags = ", ".join(rng.choice(EN) for _ in range(rng.randint(1, 2)))
            text = f"---\ntitle: {title}\ntags: [{tags}]\ncategory: {rng.choice(_CATEGORIES)}\n---\n{text}"
        out[path] = text
    return out


def _build(ix: SearchIndex, rng: random.Random, docs: dict[str, str], segments: int, merge: bool) -> None:
    """`docs` written over `segments` updates, with some files first written otherwise (replaced) and
    some extra files written and deleted again."""
    paths = sorted(docs)
    doomed = {f"gone/{i}.md": f"{rng.choice(EN)} {rng.choice(ZH)} gone\n" for i in range(rng.randint(0, 3))}
    ix.update("v0", {p: "placeholder words " + rng.choice(EN) + "\n" for p in paths[:3]} | doomed, [])
    for n in range(segments):
        ix.update(f"v{n + 1}", {p: docs[p] for p in paths[n::segments]}, [])
    ix.update("vd", {}, list(doomed))
    if merge:
        ix.merge()


def _same(ix: SearchIndex, text: str, prefix: str | None, filters: Mapping[str, str] | None) -> None:
    everything = ix.search(text, limit=1000, prefix=prefix, filters=filters, stepping=True)
    assert ix.search(text, limit=1000, prefix=prefix, filters=filters) == everything
    n = everything.total
    # What a hybrid search asks for: no snippets nor fields, each hit's word coverage from the same read.
    bare = ix.search(text, limit=1000, prefix=prefix, filters=filters, snippets=False, coverage=True)
    assert [(h.path, h.score) for h in bare.hits] == [(h.path, h.score) for h in everything.hits]
    assert bare.total == n and all(h.snippet == "" and h.fields == {} for h in bare.hits)
    shares = ix.coverage(text, [h.path for h in bare.hits])
    assert {h.path: h.coverage for h in bare.hits} == shares
    for limit in (1, 3, n + 1):
        for offset in sorted({*range(min(n, 6) + 2), *range(0, n + 2, max(1, n // 5)), max(0, n - 1)}):
            want = ix.search(text, limit=limit, offset=offset, prefix=prefix, filters=filters, stepping=True)
            got = ix.search(text, limit=limit, offset=offset, prefix=prefix, filters=filters)
            assert got == want, (limit, offset)
            assert got.hits == everything.hits[offset : offset + limit]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    data=st.data(),
    seed_=st.integers(0, 2**32),
    kind=st.sampled_from(_KINDS),
    copies=st.sampled_from((1, 1, 1, 40)),
    segments=st.integers(1, 4),
    merge=st.booleans(),
)
def test_arrays_rank_exactly_as_stepping(
    data: st.DataObject, seed_: int, kind: str, copies: int, segments: int, merge: bool
) -> None:
    rng = random.Random(seed_)
    base = _with_front_matter(rng, make_corpus(rng, kind))
    docs = {f"c{c}/{p}" if copies > 1 else p: t for c in range(copies) for p, t in base.items()}
    filters = data.draw(st.sampled_from((None, None, {"category": "work"}, {"category": "旅行"})))
    prefix = data.draw(st.sampled_from((*PREFIXES, "c1/", "c1/notes/", "c2")))
    texts = [render(data.draw(queries(base))) for _ in range(3)]
    note(f"docs={base!r} copies={copies} segments={segments} merge={merge} texts={texts!r}")
    with tempfile.TemporaryDirectory() as tmp:
        with SearchIndex(Path(tmp) / "ix") as ix:
            _build(ix, rng, docs, segments, merge)
            for text in texts:
                _same(ix, text, prefix, filters)
                _same(ix, text, None, None)


def test_postings_over_many_blocks_and_deletions(tmp_path: Path) -> None:
    """Terms in thousands of files (postings of many blocks), a third of them replaced after the big
    segment was written (deleted there, mid-block), questions of frequent and rare words."""
    rng = random.Random(7)
    docs = {}
    for i in range(1500):
        words = [
            rng.choice(EN[:8]) if rng.random() < 0.7 else rng.choice(EN + ZH)
            for _ in range(rng.randint(3, 15))
        ]
        docs[f"{rng.choice(('notes/', 'work/', ''))}d{i:04d}.md"] = " ".join(words) + "\n"
    with SearchIndex(tmp_path / "ix") as ix:
        ix.rebuild("v0", docs.items())
        paths = sorted(docs)
        for n in range(3):
            ix.update(f"v{n + 1}", {p: docs[p] + " python" for p in paths[n::9]}, paths[n + 3 :: 97])
        for text in (
            "coffee tea",
            "what did my sister say about the morning meeting?",
            "python",
            '"coffee tea" -river',
            "咖啡 绿茶 deploy",
            "the who",
        ):
            for prefix in (None, "notes/", "work/d1"):
                want = ix.search(text, limit=40, prefix=prefix, stepping=True)
                assert want.total > 0 or text == '"coffee tea" -river', (text, prefix)
                assert ix.search(text, limit=40, prefix=prefix) == want
                for offset in (0, 7, 39, want.total - 3):
                    assert ix.search(text, limit=5, offset=max(0, offset), prefix=prefix) == ix.search(
                        text, limit=5, offset=max(0, offset), prefix=prefix, stepping=True
                    )
