"""Offset pages stay consistent while only the segment layout changes (a merge, deletions kept).

Whoosh's BM25F counts deleted documents (every replaced file leaves its old copy until a merge)
in its collection statistics, and a merge re-sums field lengths from the per-document bytes. So a
merge that lands between two page requests used to change every score: page 2 repeated hits of
page 1 and skipped others. Scores now come from the live documents alone (kbserver.index.scoring).
"""

from __future__ import annotations

import random
from pathlib import Path

from kbserver.index import SearchIndex

# 6 live files hold "heron" and 8 hold "egret"; 5 old copies (deleted, not yet merged away) held
# "heron". Counting those, heron looks more common than egret (11 vs 8 files); it is rarer (6 vs 8).
_FILLER = "river bank morning light water reeds"


def _write(ix: SearchIndex) -> None:
    """Three updates, so three segments of which none holds half the documents: a merge folds all."""
    herons = {f"h{i}.md": f"heron {_FILLER}" for i in range(6)}
    ix.update("v1", herons | {f"x{i}.md": f"heron {_FILLER}" for i in range(5)}, [])
    ix.update("v2", {f"e{i}.md": f"egret {_FILLER}" for i in range(8)}, [])
    ix.update("v3", {f"x{i}.md": f"kingfisher {_FILLER}" for i in range(5)}, [])  # old copies deleted


def _page(ix: SearchIndex, offset: int, limit: int = 4) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in ix.search("heron egret", limit=limit, offset=offset).hits]


def test_a_merge_between_two_pages_neither_repeats_nor_skips_a_hit(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        _write(ix)
        walk = _page(ix, 0)
        assert ix.merge()  # what the follower does when it is idle: same version, same files
        for offset in range(4, 14, 4):
            walk += _page(ix, offset)
        paths = [p for p, _ in walk]
        assert len(paths) == len(set(paths)), paths  # no hit on two pages
        assert set(paths) == {f"h{i}.md" for i in range(6)} | {f"e{i}.md" for i in range(8)}
        # the rarer word's files rank first, before and after the merge
        assert [p[0] for p in paths] == ["h"] * 6 + ["e"] * 8


def test_a_merge_changes_no_score(tmp_path: Path) -> None:
    with SearchIndex(tmp_path / "ix") as ix:
        _write(ix)
        before = _page(ix, 0, limit=50)
        assert ix.merge()
        assert _page(ix, 0, limit=50) == before
        assert ix.search("heron egret").version == "v3"


_WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega 咖啡 提交 信息".split()


def _text(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(1, 60))]
    body = " ".join(words)
    if rng.random() < 0.3:
        title, tag = f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}", rng.choice(_WORDS)
        return f"---\ntitle: {title}\ntags: [{tag}]\n---\n{body}\n"
    return body + "\n"


def _scores(ix: SearchIndex, query: str) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in ix.search(query, limit=1000).hits]


def test_scores_depend_only_on_the_live_files(tmp_path: Path) -> None:
    """Random histories of updates and deletes score exactly as a rebuild of the files they leave."""
    queries = [
        "alpha",
        "alpha beta",
        "gamma omega sigma",
        "咖啡",
        "提交信息 delta",
        '"beta gamma"',
        "kappa -zeta",
    ]
    for seed in range(6):
        rng = random.Random(seed)
        live: dict[str, str] = {}
        with SearchIndex(tmp_path / f"inc{seed}") as inc, SearchIndex(tmp_path / f"new{seed}") as new:
            for step in range(8):
                upserts = {
                    f"d{rng.randrange(40)}/n{rng.randrange(30)}.md": _text(rng)
                    for _ in range(rng.randint(1, 12))
                }
                deletes = rng.sample(sorted(live), min(len(live), rng.randint(0, 3)))
                for path in deletes:
                    live.pop(path)
                live.update(upserts)
                inc.update(f"v{step}", upserts, deletes)
                if step == 3:
                    inc.merge()
            new.rebuild("v7", sorted(live.items()))
            for query in queries:
                want = _scores(new, query)
                assert want, query
                assert _scores(inc, query) == want, (seed, query)
            inc.merge()
            for query in queries:
                assert _scores(inc, query) == _scores(new, query), (seed, query)
