"""Hybrid ranking: one list from a keyword ranking and a semantic (cosine) ranking.

The default fuses the cosine with the keyword candidates' *coverage*, the idf-weighted share of the
question's words a memory holds, rather than with min-max normalised BM25, whose best match scores 1
even when all it shares with the question is one common word (burying an answer asked in another
language). The cosine is taken as it is (clipped to [0, 1]), so a score depends on the memory and
the question alone and compares across queries; and the words count only as far as the meaning
agrees (the gate in `Fusion`). Chosen by measurement (bench/recall.py, bench/recall_public.py): the
numbers and the alternatives tried are in docs/performance.md, "Hybrid fusion: how it was chosen".
The weight is a setting (`semantic_weight`); min-max coverage, convex and RRF stay for comparison.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Fusion", "Ranked", "fuse"]


@dataclass(frozen=True)
class Fusion:
    """How to merge the two rankings.

    `absolute` (the default): `w * coverage * gate(cosine) + (1 - w) * cosine`, where coverage is
    the idf-weighted share of the question's words a memory holds, cosine the similarity of meaning,
    each clipped to [0, 1], and `gate` rises linearly from 0 at `gate[0]` to 1 at `gate[1]` (words
    count as far as the meaning agrees): absolute, so a score in [0, 1] that depends on the memory
    and the question alone. `coverage`: the same with the cosine min-max normalised over the semantic
    ranking (from `semantic_floor`), which ties a score to what else was found; `convex`: the
    same with min-max normalised BM25 scores instead of coverage; `rrf`: reciprocal-rank fusion with
    constant `rrf_k`. `keyword_weight` is w.
    """

    method: Literal["absolute", "coverage", "convex", "rrf"] = "absolute"
    keyword_weight: float = 0.3
    rrf_k: float = 10.0
    gate: tuple[float, float] = (0.1, 0.5)

    def __post_init__(self) -> None:
        if not 0.0 <= self.keyword_weight <= 1.0:
            raise ValueError("keyword_weight must be between 0 and 1")
        if not self.gate[0] < self.gate[1]:
            raise ValueError("gate must rise: its start below its end")
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


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))


def _gate(cosine: float | None, gate: tuple[float, float]) -> float:
    """How much of a memory's word coverage counts: 0 up to gate[0], 1 from gate[1] (no cosine: 0)."""
    if cosine is None:
        return 0.0
    low, high = gate
    return _clip((cosine - low) / (high - low))


def fuse(
    keyword: Sequence[Ranked],
    semantic: Sequence[Ranked],
    fusion: Fusion | None = None,
    *,
    semantic_floor: float | None = None,
    coverage: Mapping[str, float] | None = None,
    keyword_only: Collection[str] = (),
) -> list[Ranked]:
    """Every key of either list, best first, with its fused score; ties broken by key.

    `semantic` may be the top k of a longer ranking (with any ties of the k-th, and every key of
    `keyword`) whose lowest score is `semantic_floor`: the normalisation is then that of the whole
    ranking, and the first k places come out as if it were passed in full, since a key left out
    scores less than each of those k (for a keyword weight below 1).

    Absolute: `w * coverage * gate(cosine) + (1 - w) * cosine` (each clipped to [0, 1]), with
    `coverage` the share of the question's words each key of `keyword` holds (0 when missing) and
    the gate as in `Fusion`; ties follow the keyword ranking, then key. Coverage: `w * coverage +
    (1 - w) * norm(cosine)`.
    Convex: `w * norm(bm25) + (1 - w) * norm(cosine)`, a key missing from a list counting 0 there.
    RRF: `sum 1 / (k + rank)` over the lists that hold the key (ranks from 1).

    `keyword_only` names keys of `keyword` that the semantic side cannot score at all (no vector yet:
    written since the embeddings last caught up). Their words stand in for their meaning: absolute,
    coverage and convex give them their keyword part with weight 1, RRF counts their keyword rank twice.
    Counting the missing meaning as 0 would rank a memory written a moment ago, the question's only
    keyword match, below every memory merely close to the question in meaning, off the page until
    the follower embeds it.
    """
    fusion = fusion or Fusion()
    scores: dict[str, float] = {}
    if fusion.method == "rrf":
        for ranking in (keyword, semantic):
            for rank, r in enumerate(ranking, start=1):
                if r.key in keyword_only and ranking is semantic:
                    continue
                share = 2.0 if r.key in keyword_only else 1.0
                scores[r.key] = scores.get(r.key, 0.0) + share / (fusion.rrf_k + rank)
    elif fusion.method in ("absolute", "coverage"):
        w = fusion.keyword_weight
        covered = coverage or {}
        if fusion.method == "absolute":
            meaning = {r.key: _clip(r.score) for r in semantic}
        else:
            meaning = _min_max(semantic, semantic_floor)
        for r in keyword:
            words = _clip(covered.get(r.key, 0.0))
            if r.key in keyword_only:  # no meaning to weigh the words against: they stand alone
                scores[r.key] = words
            elif fusion.method == "absolute":
                scores[r.key] = w * words * _gate(meaning.get(r.key), fusion.gate)
            else:
                scores[r.key] = w * words
        for key, value in meaning.items():
            if key not in keyword_only:
                scores[key] = scores.get(key, 0.0) + (1.0 - w) * value
        place = {r.key: i for i, r in enumerate(keyword)}
        last = len(place)
        return [
            Ranked(k, s)
            for k, s in sorted(scores.items(), key=lambda kv: (-kv[1], place.get(kv[0], last), kv[0]))
        ]
    else:
        w = fusion.keyword_weight
        for key, value in _min_max(keyword).items():
            scores[key] = scores.get(key, 0.0) + (1.0 if key in keyword_only else w) * value
        for key, value in _min_max(semantic, semantic_floor).items():
            if key not in keyword_only:
                scores[key] = scores.get(key, 0.0) + (1.0 - w) * value
    return [Ranked(k, s) for k, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
