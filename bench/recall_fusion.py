"""Fusion variants for bench/recall_public.py: the pieces memory_search fuses, read once, fused many ways.

For each question: the keyword candidates with their word coverage (services.search.candidates,
of the question's words without the search box's operators) and the semantic ranking with the
keyword candidates' cosines and the floor (services.semantic.ranked), exactly as memory_search
reads them; then kbserver.services.reading.hybrid.fuse under each variant. `split` scores the
variants on the odd and the even conversations apart, so a weight chosen on one half is judged on
the other (a held-out check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kbserver.core.model import Caller
from kbserver.dialects import memory_base
from kbserver.dialects.memory_records import FOLDER
from kbserver.dialects.memory_words import plain
from kbserver.services.context import Services
from kbserver.services.reading import search as search_service
from kbserver.services.reading import semantic
from kbserver.services.reading.hybrid import Fusion, Ranked, fuse

CANDIDATES = memory_base.CANDIDATES  # semantic candidates, as memory_search takes
KEYWORD_CANDIDATES = memory_base.KEYWORD_CANDIDATES  # keyword candidates, as memory_search takes
UNGATED = (-1.0, 0.0)  # a gate that lets every clipped cosine's words count whole (before 2026-12)


@dataclass(frozen=True)
class Pieces:
    keyword: list[Ranked]
    meaning: list[Ranked]
    floor: float | None
    coverage: dict[str, float]


Variant = Callable[[Pieces], list[Ranked]]


def read(
    services: Services,
    caller: Caller,
    slug: str,
    question: str,
    candidates: int = CANDIDATES,
    keyword_candidates: int = KEYWORD_CANDIDATES,
) -> Pieces:
    found = search_service.candidates(
        services, caller, slug, plain(question), limit=keyword_candidates, prefix=FOLDER
    )
    ranking = semantic.ranked(
        services, caller, slug, question, limit=candidates, prefix=FOLDER, include=[c.path for c in found]
    )
    return Pieces(
        [Ranked(c.path, c.score) for c in found],
        [Ranked(h.path, h.score) for h in ranking.hits],
        ranking.floor,
        {c.path: c.coverage for c in found},
    )


def _fused(fusion: Fusion) -> Variant:
    return lambda p: fuse(p.keyword, p.meaning, fusion, semantic_floor=p.floor, coverage=p.coverage)


def _absolute(w: float, low: float, high: float) -> Variant:
    """Prototype: w * coverage + (1 - w) * the cosine mapped from [low, high] to [0, 1], clipped
    (no min-max within the query's results: the same memory scores the same whatever else is found)."""

    def rank(p: Pieces) -> list[Ranked]:
        scores = {r.key: w * min(1.0, p.coverage.get(r.key, 0.0)) for r in p.keyword}
        for r in p.meaning:
            sim = min(1.0, max(0.0, (r.score - low) / (high - low)))
            scores[r.key] = scores.get(r.key, 0.0) + (1 - w) * sim
        return [Ranked(k, v) for k, v in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]

    return rank


def variants(weights: Sequence[float], spans: Sequence[tuple[float, float]] = ()) -> dict[str, Variant]:
    out: dict[str, Variant] = {}
    for low, high in spans:
        for w in weights:
            out[f"absolute [{low:g},{high:g}] w={w:g}"] = _absolute(w, low, high)
    for w in weights:
        out[f"absolute w={w:g}"] = _fused(Fusion(keyword_weight=w))
    for w in weights:
        out[f"absolute ungated w={w:g}"] = _fused(Fusion(keyword_weight=w, gate=UNGATED))
    for w in weights:
        out[f"coverage w={w:g}"] = _fused(Fusion(method="coverage", keyword_weight=w))
    for w in weights:
        out[f"convex w={w:g}"] = _fused(Fusion(method="convex", keyword_weight=w))
    for k in (10.0, 60.0):
        out[f"rrf k={k:g}"] = _fused(Fusion(method="rrf", rrf_k=k))
    return out
