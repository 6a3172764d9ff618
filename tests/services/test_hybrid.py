"""Hybrid fusion against a reference written from its definition, on generated rankings."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbserver.services.reading.hybrid import Fusion, Ranked, fuse

_keys = st.sampled_from([f"m{i}" for i in range(12)])


def _ranking(draw_scores: list[tuple[str, float]]) -> list[Ranked]:
    seen: dict[str, float] = {}
    for key, score in draw_scores:
        seen.setdefault(key, score)
    return [Ranked(k, s) for k, s in sorted(seen.items(), key=lambda kv: -kv[1])]


rankings = st.lists(st.tuples(_keys, st.floats(0, 50, allow_nan=False)), max_size=12).map(_ranking)


def _reference_convex(kw: list[Ranked], sem: list[Ranked], w: float) -> dict[str, float]:
    def norm(rs: list[Ranked]) -> dict[str, float]:
        if not rs:
            return {}
        lo, hi = min(r.score for r in rs), max(r.score for r in rs)
        return {r.key: 1.0 if hi == lo else (r.score - lo) / (hi - lo) for r in rs}

    a, b = norm(kw), norm(sem)
    return {k: w * a.get(k, 0.0) + (1 - w) * b.get(k, 0.0) for k in a.keys() | b.keys()}


@given(kw=rankings, sem=rankings, w=st.floats(0, 1))
def test_convex_fusion_equals_its_definition(kw: list[Ranked], sem: list[Ranked], w: float) -> None:
    got = fuse(kw, sem, Fusion(method="convex", keyword_weight=w))
    expected = _reference_convex(kw, sem, w)
    assert {r.key for r in got} == expected.keys()
    for r in got:
        assert r.score == pytest.approx(expected[r.key])
    assert [(r.score, r.key) for r in got] == sorted(
        ((r.score, r.key) for r in got), key=lambda t: (-t[0], t[1])
    )


@given(kw=rankings, sem=rankings, k=st.floats(0.5, 100))
def test_rrf_equals_its_definition(kw: list[Ranked], sem: list[Ranked], k: float) -> None:
    got = {r.key: r.score for r in fuse(kw, sem, Fusion(method="rrf", rrf_k=k))}
    expected: dict[str, float] = {}
    for ranking in (kw, sem):
        for rank, r in enumerate(ranking, start=1):
            expected[r.key] = expected.get(r.key, 0.0) + 1 / (k + rank)
    assert got == pytest.approx(expected)


def test_weights_at_the_ends_give_one_side_only() -> None:
    kw = [Ranked("a", 9.0), Ranked("b", 5.0), Ranked("c", 1.0)]
    sem = [Ranked("c", 0.9), Ranked("b", 0.55), Ranked("a", 0.5), Ranked("d", 0.1)]  # all past the gate
    for method in ("convex", "coverage", "absolute"):
        coverage = {"a": 1.0, "b": 0.6, "c": 0.2}
        ends = [fuse(kw, sem, Fusion(method=method, keyword_weight=w), coverage=coverage) for w in (1.0, 0.0)]  # type: ignore[arg-type]
        assert [r.key for r in ends[0]][:3] == ["a", "b", "c"]
        assert [r.key for r in ends[1]][:2] == ["c", "b"]
    # a key both sides like beats each side's favourite at the default weight
    both = [Ranked("a", 9.0), Ranked("b", 8.0), Ranked("c", 1.0)]
    meaning = [Ranked("c", 0.9), Ranked("b", 0.85), Ranked("d", 0.1)]
    assert fuse(both, meaning, coverage={"a": 1.0, "b": 1.0, "c": 0.2})[0].key == "b"
    assert fuse([], []) == []


@given(kw=rankings, sem=rankings, w=st.floats(0, 1), data=st.data())
def test_coverage_fusion_equals_its_definition(
    kw: list[Ranked], sem: list[Ranked], w: float, data: st.DataObject
) -> None:
    """w * coverage + (1 - w) * min-max(cosine); ties in the keyword ranking's order, then by key."""
    coverage = {r.key: data.draw(st.floats(0, 1)) for r in kw}
    got = fuse(kw, sem, Fusion(method="coverage", keyword_weight=w), coverage=coverage)
    lo, hi = min((r.score for r in sem), default=0.0), max((r.score for r in sem), default=0.0)
    meaning = {r.key: 1.0 if hi == lo else (r.score - lo) / (hi - lo) for r in sem}
    expected = {r.key: w * coverage[r.key] for r in kw}
    for key, value in meaning.items():
        expected[key] = expected.get(key, 0.0) + (1 - w) * value
    assert {r.key: r.score for r in got} == pytest.approx(expected)
    place = {r.key: i for i, r in enumerate(kw)}
    order = sorted(expected, key=lambda k: (-expected[k], place.get(k, len(kw)), k))
    scores = [expected[k] for k in order]
    assert [expected[r.key] for r in got] == pytest.approx(scores)  # the same order up to float ties
    assert [r.key for r in got] == order or any(a == pytest.approx(b) for a, b in itertools.pairwise(scores))


cosines = st.lists(st.tuples(_keys, st.floats(-1, 1, allow_nan=False)), max_size=12).map(_ranking)


@given(kw=rankings, sem=cosines, w=st.floats(0, 1), data=st.data())
def test_absolute_fusion_equals_its_definition(
    kw: list[Ranked], sem: list[Ranked], w: float, data: st.DataObject
) -> None:
    """The default: w * coverage * gate(cosine) + (1 - w) * cosine, each clipped to [0, 1], the gate
    rising from 0 at a cosine of 0.1 to 1 at 0.5; no normalisation."""
    coverage = {r.key: data.draw(st.floats(-0.5, 1.5)) for r in kw}
    sem = [Ranked(r.key, r.score / 50) for r in sem]  # cosines: at most 1, across the gate
    got = fuse(kw, sem, Fusion(keyword_weight=w), coverage=coverage)
    clip = lambda x: min(1.0, max(0.0, x))  # noqa: E731
    cosine = {r.key: clip(r.score) for r in sem}
    expected = {
        r.key: w * clip(coverage[r.key]) * (clip((cosine[r.key] - 0.1) / 0.4) if r.key in cosine else 0.0)
        for r in kw
    }
    for r in sem:
        expected[r.key] = expected.get(r.key, 0.0) + (1 - w) * cosine[r.key]
    assert {r.key: r.score for r in got} == pytest.approx(expected)
    assert all(0.0 <= r.score <= 1.0 + 1e-9 for r in got)
    assert [r.score for r in got] == sorted((r.score for r in got), reverse=True)


@given(sem=cosines, extra=cosines, w=st.floats(0, 0.99))
def test_an_absolute_score_does_not_depend_on_what_else_was_found(
    sem: list[Ranked], extra: list[Ranked], w: float
) -> None:
    alone = {r.key: r.score for r in fuse([], sem, Fusion(keyword_weight=w))}
    more = _ranking([(r.key, r.score) for r in sem] + [(f"x{r.key}", r.score) for r in extra])
    together = {r.key: r.score for r in fuse([], more, Fusion(keyword_weight=w))}
    assert {k: together[k] for k in alone} == pytest.approx(alone)


def test_near_identical_memories_score_alike() -> None:
    """Two memories a hair apart in meaning, alone in their KB: min-max made them 1 and 0."""
    sem = [Ranked("a", 0.52), Ranked("b", 0.51)]
    got = fuse([], sem, Fusion(), semantic_floor=0.51)
    assert got[0].score - got[1].score == pytest.approx((1 - Fusion().keyword_weight) * 0.01)
    minmax = fuse([], sem, Fusion(method="coverage"), semantic_floor=0.51)
    assert minmax[0].score - minmax[1].score == pytest.approx(1 - Fusion().keyword_weight)


def test_words_count_as_far_as_the_meaning_agrees() -> None:
    """A memory holding every word of the question but little of its meaning gains nothing from
    the words below a cosine of 0.1, half at 0.3, all from 0.5; meaning alone ranks the rest."""
    kw = [Ranked(k, 5.0) for k in ("far", "halfway", "close", "closer")]
    sem = [Ranked("closer", 0.6), Ranked("close", 0.5), Ranked("halfway", 0.3), Ranked("far", 0.05)]
    coverage = dict.fromkeys(("far", "halfway", "close", "closer"), 1.0)
    got = {r.key: r.score for r in fuse(kw, sem, Fusion(keyword_weight=0.3), coverage=coverage)}
    assert got["far"] == pytest.approx(0.7 * 0.05)
    assert got["halfway"] == pytest.approx(0.3 * 0.5 + 0.7 * 0.3)
    assert got["close"] == pytest.approx(0.3 + 0.7 * 0.5)
    assert got["closer"] == pytest.approx(0.3 + 0.7 * 0.6)
    # a memory sharing one word with the question, past an answer in its other words: the answer wins
    answer, bystander = Ranked("answer", 0.31), Ranked("bystander", 0.24)
    fused = fuse([Ranked("bystander", 3.0)], [answer, bystander], coverage={"bystander": 0.41})
    assert [r.key for r in fused] == ["answer", "bystander"]
    ungated = fuse(
        [Ranked("bystander", 3.0)],
        [answer, bystander],
        Fusion(gate=(-1.0, 0.0)),
        coverage={"bystander": 0.41},
    )
    assert [r.key for r in ungated] == ["bystander", "answer"]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="keyword_weight"):
        Fusion(keyword_weight=1.5)
    with pytest.raises(ValueError, match="gate"):
        Fusion(gate=(0.5, 0.5))
    with pytest.raises(ValueError, match="rrf_k"):
        Fusion(method="rrf", rrf_k=0)


@given(
    kw=rankings,
    sem=rankings,
    k=st.integers(1, 12),
    w=st.floats(0, 0.99),
    method=st.sampled_from(["convex", "coverage", "absolute"]),
    covered=st.floats(0, 1),
)
def test_the_top_of_a_ranking_with_its_floor_fuses_like_the_whole(
    kw: list[Ranked], sem: list[Ranked], k: int, w: float, method: str, covered: float
) -> None:
    """memory_search passes only the best k by meaning, the keyword candidates' scores by meaning
    and the lowest score of all: the first k places must be those of fusing the whole ranking."""
    fusion = Fusion(method=method, keyword_weight=w)  # type: ignore[arg-type]
    coverage = {r.key: covered / (1 + i) for i, r in enumerate(kw)}
    if method == "absolute":  # scores are cosines there: at most 1, so clipping makes no new ties
        sem = [Ranked(r.key, r.score / 50) for r in sem]
    whole = fuse(kw, sem, fusion, coverage=coverage)
    if len(sem) > k:  # keep ties with the k-th, as the vector store does
        cut = sem[k - 1].score
        top = [r for r in sem if r.score >= cut or r.key in {x.key for x in kw}]
    else:
        top = sem
    floor = min((r.score for r in sem), default=None)
    part = fuse(kw, top, fusion, semantic_floor=floor, coverage=coverage)
    assert [(r.key, pytest.approx(r.score)) for r in part[:k]] == [(r.key, r.score) for r in whole[:k]]


@pytest.mark.parametrize("method", ["absolute", "coverage", "convex", "rrf"])
def test_keys_without_a_vector_rank_by_their_words_alone(method: str) -> None:
    """A memory not embedded yet (keyword_only) is scored by its words standing in for its meaning:
    the question's only keyword match must not fall below memories merely close in meaning."""
    kw = [Ranked("new", 7.0)]
    sem = [Ranked(f"m{i}", 0.9 - i / 20) for i in range(10)]
    fusion = Fusion(method=method)  # type: ignore[arg-type]
    coverage = {"new": 1.0}
    without = [r.key for r in fuse(kw, sem, fusion, coverage=coverage)]
    assert without.index("new") > 0  # its missing meaning counted as 0 buries it
    got = fuse(kw, sem, fusion, coverage=coverage, keyword_only={"new"})
    assert got[0].key == "new"
    if method != "rrf":
        assert got[0].score == pytest.approx(1.0)  # its keyword part, with weight 1
    assert [r.key for r in got[1:]] == [r.key for r in sem]  # the others as before
