"""Benchmark kbserver.index (Whoosh) against SQLite FTS5 (unicode61 over pre-bigrammed text).

    python -m bench.search_engine [--docs 10000] [--repeat 50]
    python -m bench.search_engine --scoring [--docs 10000] [--replaced 1000] [--repeat 50]
    python -m bench.search_engine --collector [--docs 10000] [--repeat 3]

Both engines index the same deterministic corpus of mixed English/Chinese notes (15-40 words each)
in the same run. Query times are for the top 10 plus the total count; Whoosh's also include
snippets. Updates replace one document and commit.

--scoring measures what scoring from live documents only (kbserver/index/scoring.py) costs against
Whoosh's own BM25F statistics (the baseline, put back in this process only), in the same run on
the same corpus: each index is rebuilt, then `--replaced` notes are replaced 10 per update with a
merge every 10 updates (as the follower does), which leaves their old copies deleted in the big
segment: the case where live statistics have work to do. Rows: warm queries (one searcher reused),
an update followed by a search (a new searcher: per-searcher statistics start empty), and opening
the index and searching once (every statistic computed afresh). Medians, and live / baseline.

--collector measures ranking over arrays (kbserver/index/arrays.py, what searches use) against the
reference collector that steps every match in Python (collect.py, `stepping=True`), in the same run
on the same index, with the 133 questions of bench/recall_set.py: over `--docs` memories as
bench/memory_mcp.py generates them (files under memories/, as memory_search asks: prefix
memories/, 100 candidates, no snippets) and over this module's notes (top 10 with snippets), both
rebuilt, then 10 files replaced and the small segments merged (as the follower leaves them). Each
question is asked `--repeat` times, the two collectors alternately; every answer of the two is
checked equal. Prints p50 / p95 per collector and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from whoosh import scoring

from kbserver.index import SearchIndex
from kbserver.index import reader as index_reader
from kbserver.index.analysis import terms

_EN = (
    "memory agent note user prefers tea meeting project deadline review branch merge commit deploy "
    "server client request response cache token session schedule morning evening weekly report "
    "design test failure retry queue worker index search query result version history change "
    "file folder path document summary detail priority backlog sprint ticket release config"
).split()
_ZH = (
    "用户 喜欢 项目 会议 提交 信息 版本 历史 修改 文件 目录 文档 摘要 细节 优先 任务 发布 配置 "
    "记忆 笔记 代理 请求 响应 缓存 会话 日程 早上 晚上 每周 报告 设计 测试 失败 重试 队列 索引 "
    "搜索 查询 结果 中文 编写 使用 团队 客户 服务 数据 系统 问题"
).split()


def corpus(n: int, seed: int = 42) -> list[tuple[str, str]]:
    """`n` notes: half mostly English, half mostly Chinese; the query terms have fixed frequencies."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words: list[str] = []
        chinese = i % 2 == 1
        for _ in range(rng.randint(15, 40)):
            if chinese:
                words.append(rng.choice(_ZH) if rng.random() < 0.8 else rng.choice(_EN))
            else:
                words.append(rng.choice(_EN) if rng.random() < 0.9 else rng.choice(_ZH))
        if rng.random() < 0.26:
            words.insert(rng.randrange(len(words)), "git")  # frequent: ~26 % of notes
        if rng.random() < 0.001:
            words.insert(rng.randrange(len(words)), "zebra")  # rare: ~0.1 %
        if rng.random() < 0.001:
            words.insert(rng.randrange(len(words)), "咖啡")  # rare CJK word: ~0.1 %
        body = words[0]
        for prev, word in itertools.pairwise(words):
            cjk = "\u4e00" <= prev[-1] <= "\u9fff" and "\u4e00" <= word[0] <= "\u9fff"
            body += ("" if cjk else " ") + word  # Chinese runs have no spaces, English words do
        if i % 5 == 0:
            body = f"---\ntitle: note {i}\ntags: [{rng.choice(_EN)}, {rng.choice(_EN)}]\n---\n{body}"
        docs.append((f"d{i % 100:03d}/note{i:06d}.md", body))
    docs[n // 2] = (docs[n // 2][0], docs[n // 2][1] + " 用户喜欢喝美式咖啡")  # one doc with 美式咖啡
    return docs


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _times(fn: Callable[[int], object], repeat: int) -> tuple[float, float]:
    fn(-1)  # warm up
    samples = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def _ignoring_index(fn: Callable[[], object]) -> Callable[[int], object]:
    return lambda _: fn()


_QUERIES = {
    "rare (zebra)": "zebra",
    "CJK (咖啡)": "咖啡",
    "CJK (美式咖啡)": "美式咖啡",
    "frequent (git)": "git",
}


def bench_whoosh(docs: list[tuple[str, str]], folder: Path, repeat: int) -> dict[str, str]:
    out: dict[str, str] = {}
    ix = SearchIndex(folder)
    t = time.perf_counter()
    ix.rebuild("v0", docs)
    out["build"] = f"{time.perf_counter() - t:.1f} s"
    out["size"] = f"{_size(folder) / 1e6:.1f} MB"
    ix.search("warm")
    for label, text in _QUERIES.items():
        total = ix.search(text).total
        p50, p95 = _times(_ignoring_index(functools.partial(ix.search, text)), repeat)
        out[label] = f"{p50:.1f} / {p95:.1f} ms ({total} hits)"
    p50, p95 = _times(lambda i: ix.update(f"u{i}", {docs[i * 7][0]: docs[i * 7][1] + " edited"}, []), repeat)
    out["update 1 doc"] = f"{p50:.1f} / {p95:.1f} ms"

    def update_then_search(i: int) -> None:
        ix.update(f"w{i}", {docs[i * 11][0]: docs[i * 11][1] + " again"}, [])
        ix.search("zebra")

    p50, p95 = _times(update_then_search, repeat)
    out["update + next search"] = f"{p50:.1f} / {p95:.1f} ms"
    ix.close()
    return out


def bench_fts5(docs: list[tuple[str, str]], folder: Path, repeat: int) -> dict[str, str]:
    out: dict[str, str] = {}
    db_path = folder / "fts.db"
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize='unicode61')")
    t = time.perf_counter()
    with db:
        db.executemany(
            "INSERT INTO docs(rowid, path, body) VALUES (?, ?, ?)",
            ((i, p, " ".join(terms(text))) for i, (p, text) in enumerate(docs)),
        )
    out["build"] = f"{time.perf_counter() - t:.1f} s"
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    out["size"] = f"{_size(folder) / 1e6:.1f} MB"

    def search(text: str) -> None:
        match = '"' + " ".join(terms(text)) + '"'
        db.execute("SELECT path FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT 10", (match,)).fetchall()
        db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (match,)).fetchone()

    for label, text in _QUERIES.items():
        match = '"' + " ".join(terms(text)) + '"'
        total = db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (match,)).fetchone()[0]
        p50, p95 = _times(_ignoring_index(functools.partial(search, text)), repeat)
        out[label] = f"{p50:.2f} / {p95:.2f} ms ({total} hits)"

    def update(i: int) -> None:
        rowid = i * 7 % len(docs)
        path, text = docs[rowid]
        with db:  # by rowid: FTS5 cannot look up its UNINDEXED path column without a full scan
            db.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
            db.execute(
                "INSERT INTO docs(rowid, path, body) VALUES (?, ?, ?)",
                (rowid, path, " ".join(terms(text + " edited"))),
            )

    p50, p95 = _times(update, repeat)
    out["update 1 doc"] = f"{p50:.2f} / {p95:.2f} ms"
    out["update + next search"] = "n/a (no reader to refresh)"
    db.close()
    return out


_SCORING_QUERIES = _QUERIES | {"question (what did git review change)": "what did git review change"}


class _WhooshBM25F(scoring.BM25F):  # type: ignore[misc]
    """The baseline: Whoosh's BM25F, its statistics counting deleted documents."""

    def __init__(self, stats: object) -> None:
        super().__init__()
        self.stats = stats


def _replace_some(ix: SearchIndex, docs: list[tuple[str, str]], count: int) -> None:
    for start in range(0, count, 10):
        batch = {
            docs[(i * 37) % len(docs)][0]: docs[(i * 37) % len(docs)][1] + " replaced"
            for i in range(start, start + 10)
        }
        ix.update(f"r{start}", batch, [])
        if (start // 10) % 10 == 9:
            ix.merge()
    ix.merge()


@contextlib.contextmanager
def _baseline() -> Iterator[None]:
    """Searchers opened inside score with Whoosh's own statistics (this process only)."""
    live = index_reader.LiveBM25F
    index_reader.LiveBM25F = _WhooshBM25F  # type: ignore[misc]
    try:
        yield
    finally:
        index_reader.LiveBM25F = live  # type: ignore[misc]


def _paired(base: Callable[[int], object], live: Callable[[int], object], repeat: int) -> tuple[float, float]:
    """Medians (ms) of `base` and `live`, sampled alternately so load on the machine hits both alike."""
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(-1, repeat):  # -1: warm-up
        for side, fn in ((0, base), (1, live)) if i % 2 else ((1, live), (0, base)):
            context = _baseline() if side == 0 else contextlib.nullcontext()
            with context:
                t = time.perf_counter()
                fn(i)
                elapsed = (time.perf_counter() - t) * 1000
            if i >= 0:
                samples[side].append(elapsed)
    return statistics.median(samples[0]), statistics.median(samples[1])


def bench_scoring(docs: list[tuple[str, str]], tmp: Path, replaced: int, repeat: int) -> None:
    question = "what did git review change"
    indexes: list[SearchIndex] = []
    for name in ("base", "live"):
        with _baseline() if name == "base" else contextlib.nullcontext():
            ix = SearchIndex(tmp / name)
            ix.rebuild("v0", docs)
            _replace_some(ix, docs, replaced)
            ix.search("warm")
        indexes.append(ix)
    base, live = indexes
    rows: dict[str, tuple[float, float]] = {}
    for label, text in _SCORING_QUERIES.items():
        a, b = base.search(text, limit=1000), live.search(text, limit=1000)
        assert a.total == b.total, label
        rows[f"{label}, {a.total} hits"] = _paired(
            _ignoring_index(functools.partial(base.search, text)),
            _ignoring_index(functools.partial(live.search, text)),
            repeat,
        )

    def update_then_search(ix: SearchIndex) -> Callable[[int], object]:
        def run(i: int) -> None:
            path, text = docs[(i + 1) * 11 % len(docs)]
            ix.update(f"w{i}", {path: text + " again"}, [])
            ix.search(question)

        return run

    rows["update 1 doc + next search (question)"] = _paired(
        update_then_search(base), update_then_search(live), repeat
    )
    for ix in indexes:
        ix.merge()
        ix.close()

    def open_and_search(folder: Path) -> Callable[[int], object]:
        def run(_: int) -> None:
            with SearchIndex(folder) as fresh:
                fresh.search(question)

        return run

    rows["open index + first search (question)"] = _paired(
        open_and_search(tmp / "base"), open_and_search(tmp / "live"), max(5, repeat // 5)
    )
    print(
        f"{len(docs)} docs, {replaced} replaced (old copies deleted, not merged away), "
        f"{repeat} samples, p50\n"
    )
    print("| | Whoosh BM25F statistics (baseline) | live-document statistics | live / baseline |")
    print("|---|---|---|---|")
    for key, (a, b) in rows.items():
        print(f"| {key} | {a:.2f} ms | {b:.2f} ms | {b / a:.2f} |")


def _memories(n: int) -> list[tuple[str, str]]:
    from bench.memory_mcp import _corpus
    from kbserver.dialects.memory_records import Memory, render_memory

    stamp = "2026-01-01T00:00:00Z"
    return [
        (
            f"memories/{i:016x}.md",
            render_memory(Memory(id=f"{i:016x}", content=text, createdAt=stamp, updatedAt=stamp)),
        )
        for i, text in enumerate(_corpus(n))
    ]


def bench_collector(n: int, tmp: Path, repeat: int) -> None:
    from bench.recall_set import QUESTIONS

    questions = [q for q, _ in QUESTIONS]
    shapes = {
        f"memory_search keyword: {n} memories, prefix memories/, limit 100, no snippets": (
            _memories(n),
            {"limit": 100, "prefix": "memories/", "snippets": False},
        ),
        f"search: {n} notes, limit 10, snippets": (corpus(n), {"limit": 10}),
    }
    print(f"{len(questions)} questions x {repeat}, the two collectors alternately, p50 / p95 ms\n")
    print("| | stepping every match (reference) | arrays | arrays / stepping |")
    print("|---|---|---|---|")
    for label, (docs, args) in shapes.items():
        folder = tmp / label.split(":")[0].replace(" ", "-")
        ix = SearchIndex(folder)
        ix.rebuild("v0", docs)
        paths = [p for p, _ in docs]
        for i in range(10):  # a few updates, as the follower writes them: more segments, deletions
            ix.update(f"v{i + 1}", {paths[i * 97]: docs[i * 97][1] + " again"}, [])
        ix.merge()  # as the follower does when commits pause: the big segment and one more
        samples: tuple[list[float], list[float]] = ([], [])
        for i in range(-1, repeat):  # -1: warm-up
            for text in questions:
                answers = []
                for stepping in (True, False) if i % 2 else (False, True):
                    t = time.perf_counter()
                    answers.append(ix.search(text, stepping=stepping, **args))  # type: ignore[arg-type]
                    if i >= 0:
                        samples[0 if stepping else 1].append((time.perf_counter() - t) * 1000)
                assert answers[0] == answers[1], text
        ix.close()
        cells = []
        for side in samples:
            side.sort()
            cells.append((statistics.median(side), side[int(len(side) * 0.95)]))
        (a50, a95), (b50, b95) = cells
        print(
            f"| {label} | {a50:.2f} / {a95:.2f} | {b50:.2f} / {b95:.2f} | {b50 / a50:.2f} / {b95 / a95:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50, help="samples per timing")
    parser.add_argument("--scoring", action="store_true", help="live-document scoring vs Whoosh's statistics")
    parser.add_argument("--replaced", type=int, default=None, help="with --scoring; default docs / 10")
    parser.add_argument(
        "--collector", action="store_true", help="ranking over arrays vs stepping every match"
    )
    args = parser.parse_args()
    if args.collector:
        tmp = Path(tempfile.mkdtemp(prefix="kb-bench-"))
        try:
            bench_collector(args.docs, tmp, 3 if args.repeat == 50 else args.repeat)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    docs = corpus(args.docs)
    if args.scoring:
        tmp = Path(tempfile.mkdtemp(prefix="kb-bench-"))
        try:
            bench_scoring(docs, tmp, args.docs // 10 if args.replaced is None else args.replaced, args.repeat)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    tmp = Path(tempfile.mkdtemp(prefix="kb-bench-"))
    try:
        (tmp / "fts").mkdir()
        whoosh = bench_whoosh(docs, tmp / "whoosh", args.repeat)
        fts = bench_fts5(docs, tmp / "fts", args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.docs} docs, {args.repeat} samples per timing, times p50 / p95\n")
    print("| | kbserver.index (Whoosh, CJK bigrams) | SQLite FTS5 unicode61, pre-bigrammed |")
    print("|---|---|---|")
    for key in whoosh:
        print(f"| {key} | {whoosh[key]} | {fts[key]} |")


if __name__ == "__main__":
    main()
