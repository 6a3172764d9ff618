"""Hybrid ranking: one list from a keyword (BM25) ranking and a semantic (cosine) ranking.

Chosen by measurement, not habit (issue 12, on a public conversational-memory benchmark, R@5):
BM25 alone 0.560-0.595, multilingual-e5-small alone 0.501, reciprocal-rank fusion with the textbook
k=60 0.584, RRF k=10 0.609, and a convex combination of min-max normalised scores weighted 0.7
toward BM25 0.631. On kbserver's own hand-written set (bench/recall.py: paraphrases, Chinese,
questions across languages, rare names), where the language-centred embedding is much stronger than
raw e5, the best convex weight is 0.4 toward BM25: R@5 0.950 against 0.942 for meaning alone and
0.719 for BM25 alone (R@1 0.711 against 0.777 for meaning alone). The convex combination with that
weight is the default; RRF stays available, and both are settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Fusion", "Ranked", "fuse"]


@dataclass(frozen=True)
class Fusion:
    """How to merge the two rankings. `keyword_weight` is the convex weight of BM25 (0..1); `rrf_k`
    the constant of reciprocal-rank fusion."""

    method: Literal["convex", "rrf"] = "convex"
    keyword_weight: float = 0.4
    rrf_k: float = 10.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.keyword_weight <= 1.0:
            raise ValueError("keyword_weight must be between 0 and 1")
        if self.rrf_k <= 0:
            raise ValueError("rrf_k must be positive")


@dataclass(frozen=True)
class Ranked:
    key: str
    score: float


def _min_max(ranking: Sequence[Ranked], floor: float | None = None) -> dict[str, float]:
    """Scores scaled to [0, 1] within one list (from `floor` when the list is the top of a longer
    one whose lowest score that is); a list whose scores are all equal scales to 1."""
    if not ranking:
        return {}
    low = min(r.score for r in ranking) if floor is None else min(floor, *(r.score for r in ranking))
    high = max(r.score for r in ranking)
    span = high - low
    return {r.key: (r.score - low) / span if span > 0 else 1.0 for r in ranking}


def fuse(
    keyword: Sequence[Ranked],
    semantic: Sequence[Ranked],
    fusion: Fusion | None = None,
    *,
    semantic_floor: float | None = None,
) -> list[Ranked]:
    """Every key of either list, best first, with its fused score; ties broken by key.

    `semantic` may be the top k of a longer ranking (with any ties of the k-th, and every key of
    `keyword`) whose lowest score is `semantic_floor`: the normalisation is then that of the whole
    ranking, and the first k places come out as if it were passed in full, since a key left out
    scores less than each of those k (for a keyword weight below 1).

    Convex: `w * norm(bm25) + (1 - w) * norm(cosine)`, a key missing from a list counting 0 there.
    RRF: `sum 1 / (k + rank)` over the lists that hold the key (ranks from 1).
    """
    fusion = fusion or Fusion()
    scores: dict[str, float] = {}
    if fusion.method == "rrf":
        for ranking in (keyword, semantic):
            for rank, r in enumerate(ranking, start=1):
                scores[r.key] = scores.get(r.key, 0.0) + 1.0 / (fusion.rrf_k + rank)
    else:
        w = fusion.keyword_weight
        for key, value in _min_max(keyword).items():
            scores[key] = scores.get(key, 0.0) + w * value
        for key, value in _min_max(semantic, semantic_floor).items():
            scores[key] = scores.get(key, 0.0) + (1.0 - w) * value
    return [Ranked(k, s) for k, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
