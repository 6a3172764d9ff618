"""Benchmark `kbserver reindex` against SQLite FTS5 building the same notes, side by side in one run.

    python -m bench.reindex [--notes 100000] [--repeat 3] [--baseline SRC] [--memories 0]

A KB is seeded (C git fast-import, one commit) with `--notes` deterministic notes shaped like the
sample KB's: YAML front matter (title, tags, category, dates) on most, Markdown prose with headings,
lists and `code`, mostly English with some Chinese notes and Chinese phrases, lengths from a line
to a few pages, in nested folders. Then, each in a fresh process so that its memory peak is its
own (ru_maxrss), alternating within each round:

- kbserver: the real command, `kbserver.cli.main(["--data", D, "reindex", SLUG])` (stderr to a file,
  so the progress shows as plain lines), timed from the call to its return, on a fresh cache;
- with `--baseline SRC`, the same command from another source tree (`git archive` of an older
  commit), put first on PYTHONPATH: before/after in one run;
- SQLite FTS5 (python's sqlite3, a file database, WAL) building a table (path UNINDEXED, body) from
  the same texts, already in memory: tokenize='unicode61' and tokenize='porter unicode61'.

The kbserver side also reads every file from git and parses front matter; FTS5 gets the texts
handed to it and tokenizes only. Two more rows say where a faster engine could take the build:

- kbserver's reading and parsing alone: the same walk of the tree, blob reads and `to_document`
  (front matter, fields) as the rebuild, with no index written: what the build costs before any
  engine sees a document, whatever the engine;
- tantivy (Rust, via the `tantivy` package, one indexing thread, path and body stored, English
  stemming), when that package is importable: a native engine building from the same texts in
  memory, as FTS5 does. The bench installs nothing; `pip install tantivy` adds the row.

Vectors: `reindex` embeds only files under memories/ (none here unless `--memories N` adds N
memory files; then the vectors sink is timed on its own row, from an empty vector folder, in a
separate process).

Prints medians, the ratio to FTS5 (unicode61) and each side's memory peak (the process's
ru_maxrss at the end, and above what it held just before the build).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, "") and "--child" not in sys.argv:  # run as `python bench/reindex.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
SLUG = "bench"
FTS_TOKENIZERS = {"FTS5 unicode61": "unicode61", "FTS5 porter": "porter unicode61"}
_SAMPLE = ROOT / "sample_kb"

_SYLLABLES = "ka ro mi den tal vor en is ul bar ex lin qua tor sen pa li mo na re ti zu han fel gri".split()
_CATEGORIES = ["decision", "practice", "architecture", "people", "log", "howto", "incident", "meeting"]
_SECTIONS = ["notes", "log", "practices", "projects", "people", "decisions"]


def _sample_words() -> tuple[list[str], list[str]]:
    """English words (most frequent first) and Chinese two-character words of the sample KB."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(_SAMPLE.rglob("*.md")))
    counts: dict[str, int] = {}
    for w in re.findall(r"[A-Za-z][a-z]+", text):
        counts[w.lower()] = counts.get(w.lower(), 0) + 1
    english = sorted(counts, key=lambda w: (-counts[w], w))
    zh: dict[str, int] = {}
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        for i in range(0, len(run) - 1, 2):
            zh[run[i : i + 2]] = zh.get(run[i : i + 2], 0) + 1
    chinese = sorted(zh, key=lambda w: (-zh[w], w))
    return english, chinese


class _Zipf:
    """Draws from `words` with weight 1 / (rank + 2.7) ** 1.1: a natural-language lexicon's head and tail."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.cum = list(itertools.accumulate(1.0 / (rank + 2.7) ** 1.1 for rank in range(len(words))))

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum, k=k)


def _vocabulary(rng: random.Random) -> tuple[_Zipf, _Zipf]:
    english, chinese = _sample_words()
    tail = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(40_000)}
    return _Zipf(english + sorted(tail - set(english))), _Zipf(chinese)


def _sentence(rng: random.Random, en: _Zipf, zh: _Zipf, chinese: bool) -> str:
    if chinese:
        words = zh.draw(rng, rng.randint(4, 14))
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), " " + en.draw(rng, 1)[0] + " ")
        return "".join(words) + "。"
    words = en.draw(rng, rng.randint(6, 20))
    if rng.random() < 0.1:
        words.insert(rng.randrange(len(words)), f"`{words[0]}_{rng.randint(1, 99)}`")
    if rng.random() < 0.08:
        words.insert(rng.randrange(len(words)), f"QS-{rng.randint(100, 999)}")
    if rng.random() < 0.05:
        words.append("".join(zh.draw(rng, rng.randint(1, 3))))
    return " ".join(words).capitalize() + "."


def _length(rng: random.Random) -> int:
    """Sentences in a note: most are short memories and log lines, some are pages."""
    r = rng.random()
    if r < 0.65:
        return rng.randint(1, 4)
    if r < 0.93:
        return rng.randint(5, 12)
    return rng.randint(13, 40)


def notes(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """`n` (path, Markdown text) notes, the same for a given `n` and `seed`."""
    rng = random.Random(seed)
    en, zh = _vocabulary(rng)
    out = []
    for i in range(n):
        chinese = rng.random() < 0.12
        title_words = zh.draw(rng, rng.randint(2, 4)) if chinese else en.draw(rng, rng.randint(2, 7))
        title = ("" if chinese else " ").join(title_words)
        lines: list[str] = []
        if rng.random() < 0.8:
            tags = ", ".join(dict.fromkeys(en.draw(rng, rng.randint(1, 5))))
            lines += ["---", f"title: {title.capitalize()}", f"tags: [{tags}]"]
            lines.append(f"category: {rng.choice(_CATEGORIES)}")
            if rng.random() < 0.5:
                lines.append(f"created: 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
            lines += ["---", ""]
        lines += [f"# {title.capitalize()}", ""]
        sentences = _length(rng)
        para: list[str] = []
        for k in range(sentences):
            if k and k % 7 == 0 and rng.random() < 0.5:
                lines += [" ".join(para), "", f"## {' '.join(en.draw(rng, 3)).capitalize()}", ""]
                para = []
            if rng.random() < 0.12:
                lines.append("- " + _sentence(rng, en, zh, chinese))
            else:
                para.append(_sentence(rng, en, zh, chinese))
        lines += [" ".join(para), ""]
        slug = "-".join(en.draw(rng, 2))
        path = f"{_SECTIONS[i % len(_SECTIONS)]}/t{(i // 7) % 400:03d}/{i:06d}-{slug}.md"
        out.append((path, "\n".join(lines)))
    return out


def memories(n: int, seed: int = 11) -> list[tuple[str, str]]:
    """`n` memory files as the memory dialects keep them (one short record per file)."""
    rng = random.Random(seed)
    en, zh = _vocabulary(rng)
    out = []
    for i in range(n):
        text = " ".join(_sentence(rng, en, zh, rng.random() < 0.1) for _ in range(rng.randint(1, 3)))
        out.append((f"memories/m{i:06d}.md", f"---\nid: m{i:06d}\ntype: fact\n---\n{text}\n"))
    return out


# -- the sides, each run in a fresh process ------------------------------------------------------------


def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _current_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _report(out: Path, seconds: float, cpu: float, before_kb: int) -> None:
    """A child's result for `_run`: its wall and CPU seconds, its memory peak and what it held before."""
    out.write_text(json.dumps({"seconds": seconds, "cpu": cpu, "peak_kb": _rss_kb(), "before_kb": before_kb}))


def child_kbserver(data: Path, out: Path, sinks: str) -> None:
    """Time `kbserver reindex` (sinks "all"), or only the vectors sink's rebuild (sinks "vectors")."""
    for name in ("index", "vectors"):
        if sinks == "all" or name == sinks:
            shutil.rmtree(data / name, ignore_errors=True)
    from kbserver import cli

    assert Path(cli.__file__).is_relative_to(Path(os.environ["PYTHONPATH"]).resolve()), cli.__file__
    before, cpu = _current_rss_kb(), _cpu()
    if sinks == "all":
        err = open(out.with_suffix(".stderr"), "w")
        saved, sys.stderr = sys.stderr, err
        t = time.perf_counter()
        try:
            code = cli.main(["--data", str(data), "reindex", SLUG])
        finally:
            sys.stderr = saved
            err.close()
        seconds = time.perf_counter() - t
        if code:
            raise SystemExit(f"kbserver reindex failed ({code}): {out.with_suffix('.stderr').read_text()}")
    else:
        from kbserver.config import Settings
        from kbserver.wiring import open_services

        settings = Settings.from_env(data=data)
        services = open_services(settings.data, settings.options())
        try:
            t = time.perf_counter()
            services.follower.catch_up(SLUG, rebuild=True, sinks=["vectors"])
            seconds = time.perf_counter() - t
        finally:
            services.close()
    cpu = _cpu() - cpu
    _report(out, seconds, cpu, before)


def child_fts(texts: Path, db: Path, tokenize: str, out: Path) -> None:
    docs = json.loads(texts.read_text(encoding="utf-8"))
    before, cpu = _current_rss_kb(), _cpu()
    t = time.perf_counter()
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute(f"CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize='{tokenize}')")
    with con:
        con.executemany("INSERT INTO docs(path, body) VALUES (?, ?)", docs)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    seconds, cpu = time.perf_counter() - t, _cpu() - cpu
    _report(out, seconds, cpu, before)


def child_read(data: Path, out: Path) -> None:
    """What the rebuild does before the engine: walk main's tree, read every blob, parse it."""
    from kbserver.index.document import to_document
    from kbserver.store.repo import KBRepo

    repo = KBRepo(str(data / "kbs" / f"{SLUG}.git"))
    try:
        before, cpu = _current_rss_kb(), _cpu()
        t = time.perf_counter()
        count = 0
        for path, blob in repo.view(repo.head()).walk():
            to_document(path, repo.blob(blob.decode()).decode("utf-8", "replace"))
            count += 1
        seconds, cpu = time.perf_counter() - t, _cpu() - cpu
    finally:
        repo.close()
    assert count, "no file read"
    _report(out, seconds, cpu, before)


def child_tantivy(texts: Path, folder: Path, out: Path) -> None:
    import tantivy

    docs = json.loads(texts.read_text(encoding="utf-8"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    before, cpu = _current_rss_kb(), _cpu()
    t = time.perf_counter()
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("path", stored=True, tokenizer_name="raw")
    schema.add_text_field("body", stored=True, tokenizer_name="en_stem")
    index = tantivy.Index(schema.build(), path=str(folder))
    writer = index.writer(heap_size=256 * 1024 * 1024, num_threads=1)  # one thread, as FTS5 and Whoosh
    for path, body in docs:
        writer.add_document(tantivy.Document(path=path, body=body))
    writer.commit()
    writer.wait_merging_threads()
    seconds, cpu = time.perf_counter() - t, _cpu() - cpu
    _report(out, seconds, cpu, before)


def _run(args: list[str], src: Path, out: Path) -> dict[str, float]:
    """One side in a fresh process, with kbserver imported from `src`. The child imports nothing of
    bench/ (its secrets.py would hide the standard library's): this file is run by path from `src`."""
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("KBSERVER_LOG_LEVEL", None)
    run = "import runpy, sys; sys.argv[0] = sys.argv.pop(1); runpy.run_path(sys.argv[0], run_name='__main__')"
    command = [sys.executable, "-c", run, str(Path(__file__).resolve()), "--child", *args, "--out", str(out)]
    subprocess.run(command, env=env, cwd=src, check=True)
    result: dict[str, float] = json.loads(out.read_text())
    return result


# -- the run -----------------------------------------------------------------------------------------


def seed_kb(data: Path, docs: list[tuple[str, str]]) -> None:
    from bench.search import seed
    from kbserver.wiring import open_services

    services = open_services(data)
    try:
        seed(services, SLUG, docs)
    finally:
        services.close()
    subprocess.run(["git", "-C", str(data / "kbs" / f"{SLUG}.git"), "gc", "-q"], check=True)


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="builds per side (medians)")
    parser.add_argument("--baseline", type=Path, help="another kbserver source tree, timed alongside")
    parser.add_argument("--memories", type=int, default=0, help="memory files to add (vectors timed apart)")
    parser.add_argument("--keep", type=Path, help="keep the seeded data folder here (reused if present)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "kbserver":
            child_kbserver(Path(rest[0]), args.out, rest[1])
        elif kind == "read":
            child_read(Path(rest[0]), args.out)
        elif kind == "tantivy":
            child_tantivy(Path(rest[0]), Path(rest[1]), args.out)
        else:
            child_fts(Path(rest[0]), Path(rest[1]), rest[2], args.out)
        return

    root = Path(tempfile.mkdtemp(prefix="kb-bench-reindex-"))
    try:
        docs = notes(args.notes) + memories(args.memories)
        size = sum(len(t.encode()) for _, t in docs)
        data = args.keep or root / "data"
        if not (data / "kbs" / f"{SLUG}.git").exists():
            _log(f"seeding {len(docs)} files ({size / 1e6:.1f} MB) with git fast-import")
            seed_kb(data, docs)
        texts = root / "texts.json"
        texts.write_text(json.dumps(docs), encoding="utf-8")
        del docs
        sides: dict[str, tuple[list[str], Path]] = {
            "kbserver reindex": (["kbserver", str(data), "all"], ROOT)
        }
        if args.baseline:
            base_data = root / "base-data"
            shutil.copytree(data / "kbs", base_data / "kbs")
            shutil.copy2(data / "control.db", base_data / "control.db")
            sides["kbserver reindex (baseline)"] = (
                ["kbserver", str(base_data), "all"],
                args.baseline.resolve(),
            )
        sides["reading + parsing alone"] = (["read", str(data)], ROOT)
        for label, tokenize in FTS_TOKENIZERS.items():
            sides[label] = (["fts", str(texts), str(root / "fts.db"), tokenize], ROOT)
        if importlib.util.find_spec("tantivy") is not None:
            sides["tantivy (native engine)"] = (["tantivy", str(texts), str(root / "tantivy")], ROOT)
        else:
            _log("the tantivy row is left out: the tantivy package is not installed (pip install tantivy)")
        if args.memories:
            sides["vectors sink alone"] = (["kbserver", str(data), "vectors"], ROOT)
        results: dict[str, list[dict[str, float]]] = {label: [] for label in sides}
        for r in range(args.repeat):
            for label, (child, src) in sides.items():
                for f in root.glob("fts.db*"):
                    f.unlink()
                out = root / "out.json"
                results[label].append(_run(child, src, out))
                _log(f"round {r + 1}/{args.repeat}: {label}: {results[label][-1]['seconds']:.2f} s")
        report(args, size, results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, size: int, results: dict[str, list[dict[str, float]]]) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"reindex benchmark: {args.notes} notes (+{args.memories} memories), {size / 1e6:.1f} MB of text, "
        f"{args.repeat} builds per side, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
        f"load {' '.join(load)}"
    )
    fts = results["FTS5 unicode61"]
    fts_wall = statistics.median(s["seconds"] for s in fts)
    fts_cpu = statistics.median(s["cpu"] for s in fts)
    print()
    print(
        f"| {'side':<28} | wall s (median) | x FTS5 | CPU s (median) | x FTS5 "
        "| peak RSS MB | peak - before MB |"
    )
    print(
        f"|{'-' * 30}|-----------------|--------|----------------|--------|-------------|------------------|"
    )
    for label, runs in results.items():
        wall = statistics.median(s["seconds"] for s in runs)
        cpu = statistics.median(s["cpu"] for s in runs)
        peak = max(s["peak_kb"] for s in runs) / 1024
        grown = max(s["peak_kb"] - s["before_kb"] for s in runs) / 1024
        print(
            f"| {label:<28} | {wall:15.2f} | {wall / fts_wall:5.1f}x | {cpu:14.2f} | {cpu / fts_cpu:5.1f}x "
            f"| {peak:11.0f} | {grown:16.0f} |"
        )
    print("x FTS5: over FTS5 unicode61's median in this run; CPU: user + system of the process (all threads)")


if __name__ == "__main__":
    main()
