"""Benchmark kbserver search end to end (service layer) next to SQLite FTS5 on the same corpus.

    python -m bench.search [--sizes 10000,100000] [--repeat 50]
    python -m bench.search --qa [--repeat 100]     (question answering: bench/search_qa.py)

For each size, a KB is seeded with C git fast-import from the deterministic mixed English/Chinese
corpus of bench/search_engine.py (Markdown files in nested folders, bench/write.py's layout), then
measured through kbserver's real services:

- index build: `follower.catch_up(slug, rebuild=True)` (reads every file from git, builds Whoosh);
- commit->searchable: with the background follower running, `writes.submit` overwrites one note
  adding a fresh token; the time from the start of the submit until `search.query` for that token
  returns the note (`progress.wait_blocking` for the version, then query until found);
- query: `search.query` (what the HTTP and MCP edges call) for a rare English word, a Chinese
  2-character word, a 4-character Chinese phrase and a frequent word; once on the freshly built
  index (one segment) and once after the commit->searchable writes (a live server's state: Whoosh
  has merged some of the small segments those commits made, not all).

SQLite FTS5 (unicode61 over text pre-split by kbserver's analyzer, so CJK bigrams match the same
way) gets the same corpus in the same run: build, the same queries, replace one row + commit until
a query finds it, then the same queries again (top 10 by rank plus the total count; kbserver's
queries also make snippets).
Progress goes to stderr, the tables to stdout. Everything runs in a temp folder removed at the end.
"""

from __future__ import annotations

import argparse
import functools
import gc
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/search.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.search_engine import _QUERIES, _size, corpus
from bench.write import layout, pct, timed
from kbserver.core.model import Overwrite, WriteRequest, WriteResult
from kbserver.index.analysis import terms
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from kbserver.services.models import SearchResults
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.wiring import open_services

TARGET_SIZE = 10_000
TARGET_COMMIT_MS = 30.0
TARGET_QUERY_MS = 10.0
TIMEOUT = 30.0

_started = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _started:7.1f}s] {msg}", file=sys.stderr, flush=True)


def notes(n: int) -> list[tuple[str, str]]:
    """The corpus of `n` notes, filed under bench/write.py's nested layout (dNNN/eN/fNNNNNN.md)."""
    return [(path, body) for path, (_, body) in zip(layout(n), corpus(n), strict=True)]


def sample(repeat: int, fn: Callable[[], object]) -> list[float]:
    """`repeat` timings (seconds) of `fn()`."""

    def step(_: int) -> None:
        fn()

    return timed(repeat, step)


def run_queries(
    repeat: int, total: Callable[[str], int], fn: Callable[[str], object]
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Timings of `fn(text)` for each benchmark query, and its number of hits (`total`, also a warm-up)."""
    hits = {label: total(text) for label, text in _QUERIES.items()}
    return {label: sample(repeat, functools.partial(fn, text)) for label, text in _QUERIES.items()}, hits


def target(i: int, n: int) -> int:
    """The note the i-th commit->searchable sample rewrites: spread over the corpus, no repeats."""
    return (i * 7919 + 13) % n


def token(i: int) -> str:
    return f"zqx{i + 1}"  # no such word in the corpus; one per sample


@dataclass
class Side:
    """One engine's numbers for one corpus size (times in seconds)."""

    build: float = 0.0
    size_mb: float = 0.0
    searchable: list[float] = field(default_factory=list)
    committed: list[float] = field(default_factory=list)  # kbserver: the submit alone
    indexed: list[float] = field(default_factory=list)  # kbserver: until wait_for returned
    fresh: dict[str, list[float]] = field(default_factory=dict)  # queries right after the build
    queries: dict[str, list[float]] = field(default_factory=dict)  # queries after the writes
    hits: dict[str, int] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)


# -- kbserver ----------------------------------------------------------------------------------------


def seed(services: Services, slug: str, docs: Iterable[tuple[str, str]]) -> None:
    """A bare KB holding `docs` in one commit on main (streamed into C git fast-import), registered."""
    repo = services.repos.path(slug)
    subprocess.run(["git", "init", "-q", "-b", "main", "--bare", str(repo)], check=True)
    with subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        proc.stdin.write(b"commit refs/heads/main\ncommitter bench <b@x> 1700000000 +0000\ndata 5\nseed\n")
        for path, body in docs:
            data = body.encode()
            proc.stdin.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        proc.stdin.close()
    if proc.returncode:
        raise RuntimeError(f"git fast-import failed with {proc.returncode}")
    services.control.add_kb(slug, "bench")


def finds(services: Services, slug: str, text: str, path: str) -> bool:
    return any(h.path == path for h in search.query(services, ADMIN, slug, text).hits)


def segments(folder: Path) -> int:
    """Whoosh segments of the live index generation under `folder` (one compound .seg file each)."""
    return len(list(folder.rglob("*.seg")))


def bench_kbserver(services: Services, slug: str, docs: list[tuple[str, str]], repeat: int) -> Side:
    out = Side()
    n = len(docs)
    log(f"kbserver: seeding {n} notes with git fast-import")
    t = time.perf_counter()
    seed(services, slug, docs)
    log(f"kbserver: seeded in {time.perf_counter() - t:.1f} s")

    repo = services.repos.repo(slug)
    t = time.perf_counter()
    view = repo.view(repo.head())
    read = sum(len(view.read(path) or b"") for path, _ in view.walk())
    out.extra["read all files from git"] = f"{time.perf_counter() - t:.1f} s ({read / 1e6:.1f} MB)"
    del view

    step = max(500, n // 10)

    def progress(_sink: str, count: int, _total: int | None) -> None:
        if count % step == 0 or count == n:
            log(f"kbserver: indexed {count}/{n}")

    t = time.perf_counter()
    services.follower.catch_up(slug, rebuild=True, progress=progress)
    out.build = time.perf_counter() - t
    out.size_mb = _size(services.data / "index" / slug) / 1e6
    log(f"kbserver: index built in {out.build:.1f} s ({out.size_mb:.1f} MB)")

    def query(text: str) -> SearchResults:
        return search.query(services, ADMIN, slug, text)

    def total(text: str) -> int:
        return query(text).total

    log(f"kbserver: queries on the fresh index x {repeat} each")
    out.fresh, out.hits = run_queries(repeat, total, query)

    services.start()  # the background follower, as in the server
    head = repo.head()
    assert head is not None
    if not services.progress.wait_blocking(slug, head, TIMEOUT):
        raise RuntimeError("the follower did not settle")

    log(f"kbserver: commit->searchable x {repeat} (+1 warm-up)")
    for i in range(-1, repeat):
        path, body = docs[target(i, n)]
        word = token(i)
        req = WriteRequest(files=[Overwrite(path=path, mode="overwrite", content=f"{body} {word}\n")])
        t0 = time.perf_counter()
        result = writes.submit(services, ADMIN, slug, req)
        t1 = time.perf_counter()
        assert isinstance(result, WriteResult)
        if not services.progress.wait_blocking(slug, result.version, TIMEOUT):
            raise RuntimeError(f"index did not cover {result.version} within {TIMEOUT} s")
        t2 = time.perf_counter()
        while not finds(services, slug, word, path):
            if time.perf_counter() - t0 > TIMEOUT:
                raise RuntimeError(f"{word} not searchable within {TIMEOUT} s")
            time.sleep(0.0005)
        t3 = time.perf_counter()
        if i >= 0:
            out.committed.append(t1 - t0)
            out.indexed.append(t2 - t0)
            out.searchable.append(t3 - t0)

    folder = services.data / "index" / slug
    out.extra["index segments: fresh / after the writes"] = f"1 / {segments(folder)}"
    log(f"kbserver: queries after the writes x {repeat} each")
    out.queries, again = run_queries(repeat, total, query)
    assert again == out.hits, (again, out.hits)
    return out


# -- SQLite FTS5 -------------------------------------------------------------------------------------


def _match(text: str) -> str:
    """`text` as an FTS5 phrase of kbserver's terms (so CJK bigrams and stems match as in Whoosh)."""
    return '"' + " ".join(terms(text)) + '"'


class Fts5:
    """The FTS5 table of bench/search_engine.py: (path UNINDEXED, body pre-split into terms)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize='unicode61')")

    def build(self, docs: list[tuple[str, str]]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT INTO docs(rowid, path, body) VALUES (?, ?, ?)",
                ((i, p, " ".join(terms(text))) for i, (p, text) in enumerate(docs)),
            )
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def replace(self, rowid: int, path: str, text: str) -> None:
        with self.db:  # by rowid: FTS5 cannot look up its UNINDEXED path column without a full scan
            self.db.execute("DELETE FROM docs WHERE rowid = ?", (rowid,))
            self.db.execute(
                "INSERT INTO docs(rowid, path, body) VALUES (?, ?, ?)", (rowid, path, " ".join(terms(text)))
            )

    def search(self, text: str) -> tuple[list[str], int]:
        match = _match(text)
        rows = self.db.execute(
            "SELECT path FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT 10", (match,)
        ).fetchall()
        total = self.db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (match,)).fetchone()[0]
        return [r[0] for r in rows], int(total)

    def close(self) -> None:
        self.db.close()


def bench_fts5(folder: Path, docs: list[tuple[str, str]], repeat: int) -> Side:
    out = Side()
    n = len(docs)
    folder.mkdir(parents=True)
    fts = Fts5(folder / "fts.db")
    try:
        log(f"FTS5: building {n} rows")
        t = time.perf_counter()
        fts.build(docs)
        out.build = time.perf_counter() - t
        out.size_mb = _size(folder) / 1e6
        log(f"FTS5: built in {out.build:.1f} s ({out.size_mb:.1f} MB)")
        out.fresh, out.hits = run_queries(repeat, lambda text: fts.search(text)[1], fts.search)
        for i in range(-1, repeat):
            rowid = target(i, n)
            path, body = docs[rowid]
            word = token(i)
            t0 = time.perf_counter()
            fts.replace(rowid, path, f"{body} {word}\n")
            while path not in fts.search(word)[0]:
                if time.perf_counter() - t0 > TIMEOUT:
                    raise RuntimeError(f"{word} not searchable within {TIMEOUT} s")
            if i >= 0:
                out.searchable.append(time.perf_counter() - t0)
        out.queries, again = run_queries(repeat, lambda text: fts.search(text)[1], fts.search)
        assert again == out.hits, (again, out.hits)
    finally:
        fts.close()
    return out


# -- report ------------------------------------------------------------------------------------------


def ms(samples: list[float]) -> str:
    return f"{pct(samples, 0.5):.2f} / {pct(samples, 0.95):.2f} ms" if samples else "n/a"


def hits(n: int) -> str:
    return f"{n} hit" if n == 1 else f"{n} hits"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


def table(n: int, repeat: int, kb: Side, fts: Side) -> None:
    print(f"\n### {n:,} notes ({repeat} samples per timing; times p50 / p95)\n")
    print(
        "| | kbserver (services, Whoosh) | SQLite FTS5 (unicode61, pre-bigrammed) | kbserver / FTS5 (p50) |"
    )
    print("|---|---|---|---|")
    rows: list[tuple[str, str, str, str]] = [
        ("index build", f"{kb.build:.2f} s", f"{fts.build:.2f} s", ratio(kb.build, fts.build)),
        ("index size", f"{kb.size_mb:.1f} MB", f"{fts.size_mb:.1f} MB", ratio(kb.size_mb, fts.size_mb)),
        (
            "commit→searchable",
            ms(kb.searchable),
            ms(fts.searchable),
            ratio(pct(kb.searchable, 0.5), pct(fts.searchable, 0.5)),
        ),
        ("  ↳ until writes.submit returned", ms(kb.committed), "", ""),
        ("  ↳ until wait_for returned (indexed)", ms(kb.indexed), "", ""),
    ]
    for when, kbq, ftsq in (
        ("fresh index", kb.fresh, fts.fresh),
        (f"after {repeat} writes", kb.queries, fts.queries),
    ):
        for label in _QUERIES:
            k, f = kbq[label], ftsq[label]
            rows.append(
                (
                    f"query {label}, {when}",
                    f"{ms(k)} ({hits(kb.hits[label])})",
                    f"{ms(f)} ({hits(fts.hits[label])})",
                    ratio(pct(k, 0.5), pct(f, 0.5)),
                )
            )
    rows += [(key, value, "", "") for key, value in kb.extra.items()]
    for row in rows:
        print("| " + " | ".join(row) + " |")


def targets(results: dict[int, Side]) -> None:
    print()
    kb = results.get(TARGET_SIZE)
    if kb is None:
        print(f"targets: not measured (add {TARGET_SIZE} to --sizes)")
        return
    p50, p95 = pct(kb.searchable, 0.5), pct(kb.searchable, 0.95)
    print(
        f"target commit→searchable p50 ≤ {TARGET_COMMIT_MS:.0f} ms at {TARGET_SIZE:,} notes: "
        f"{verdict(p50, TARGET_COMMIT_MS)} (p50 {p50:.2f} ms, p95 {p95:.2f} ms)"
    )
    for when, queries in (("after the writes", kb.queries), ("on the fresh index", kb.fresh)):
        worst = max(queries, key=lambda label: pct(queries[label], 0.5))
        p50 = pct(queries[worst], 0.5)
        each = ", ".join(f"{label} {pct(s, 0.5):.2f}" for label, s in queries.items())
        print(
            f"target query p50 ≤ {TARGET_QUERY_MS:.0f} ms at {TARGET_SIZE:,} notes, {when}: "
            f"{verdict(p50, TARGET_QUERY_MS)} (worst p50 {p50:.2f} ms for {worst}; {each} ms)"
        )


def verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else f"NOT met, {value - limit:.2f} ms ({value / limit - 1:.0%}) over"


def run_size(root: Path, n: int, repeat: int) -> tuple[Side, Side]:
    folder = root / f"n{n}"
    try:
        log(f"== {n} notes: generating the corpus")
        docs = notes(n)
        services = open_services(folder / "data")
        try:
            kb = bench_kbserver(services, f"kb{n}", docs, repeat)
        finally:
            services.close()
        shutil.rmtree(folder / "data", ignore_errors=True)
        fts = bench_fts5(folder / "fts", docs, repeat)
        return kb, fts
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        gc.collect()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--repeat", type=int, default=50, help="samples per timing")
    parser.add_argument(
        "--qa", action="store_true", help="the question-answering set instead (bench/search_qa.py)"
    )
    args = parser.parse_args(argv)
    if args.qa:
        from bench.search_qa import main as qa_main

        qa_main(args.repeat)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="kb-bench-search-"))
    results: dict[int, tuple[Side, Side]] = {}
    try:
        for n in sizes:
            results[n] = run_size(root, n, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"search benchmark, {args.repeat} samples per timing, fsync on, Python {sys.version.split()[0]}")
    for n in sizes:
        table(n, args.repeat, *results[n])
    targets({n: kb for n, (kb, _) in results.items()})


if __name__ == "__main__":
    main()
