"""Question answering over conversation-like notes: kbserver next to SQLite FTS5, plus latencies.

    python -m bench.search --qa [--repeat 100]

Data (written by hand, never generated from the notes): bench/qa_notes.txt holds 308 short
notes an agent might have remembered (English and Chinese, in 14 folders), bench/qa_questions.txt
166 questions a user might ask, each naming the note that answers it, paraphrased the way people
ask ("What breed is Alice's new dog?" for "...her new puppy is a beagle called Pepper...").

In one run it measures:
- R@5 / R@10: the answering note among the first 5 / 10 hits, for kbserver (`search.query` through
  the services, as the edges call it) and for SQLite FTS5 BM25 (`porter unicode61`, Chinese runs
  pre-split into bigrams, the question's words ORed), over the whole KB and under the answer's
  folder prefix (FTS5: `path LIKE 'folder/%'`).
- query p50/p95 of those searches through the services;
- service-level write p50 (one-file append, `writes.submit`, fsync on, embedded indexer running)
  and commit->searchable p50 (submit an overwrite holding a fresh word, wait for the index to cover
  its version, then `search.query` until it finds the note);
- on a live server (uvicorn subprocess, the full app plus a `noop` MCP tool, as bench/mcp.py),
  once indexing in the serving process (embedded follower) and once with `kbserver worker`:
  HTTP `GET /healthz` and `POST /write` p50, MCP `noop` and `search_context` p50/p95 with the
  official client over Streamable HTTP, and commit->searchable over HTTP (POST /write, GET
  /index?wait_for=, GET /search).
Progress goes to stderr, the tables to stdout; everything runs in a temp folder removed at the end.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench.mcp import _free_port, _wait_healthy
from kbserver.core.model import Append, Overwrite, WriteRequest
from kbserver.services import kbs
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.reading import search
from kbserver.services.writing import writes
from kbserver.wiring import open_services

HERE = Path(__file__).resolve().parent
SLUG = "qa"
AGENT = "asker"
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_]+")


@dataclass(frozen=True)
class Note:
    tag: str
    path: str
    text: str


def load() -> tuple[list[Note], list[tuple[str, list[str]]]]:
    """The notes (path = folder/nNNN.md, so file names give nothing away) and (question, answer paths)."""
    notes: list[Note] = []
    folder = ""
    for line in (HERE / "qa_notes.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            folder = line[3:].strip()
        elif " | " in line:
            tag, text = (part.strip() for part in line.split(" | ", 1))
            notes.append(Note(tag, f"{folder}/n{len(notes):03d}.md", text + "\n"))
    by_tag = {n.tag: n.path for n in notes}
    assert len(by_tag) == len(notes), "duplicate note tags"
    questions = []
    for line in (HERE / "qa_questions.txt").read_text(encoding="utf-8").splitlines():
        if " | " in line:
            tags, question = (part.strip() for part in line.split(" | ", 1))
            questions.append((question, [by_tag[t] for t in tags.split(",")]))
    return notes, questions


def log(msg: str) -> None:
    print(f"[qa] {msg}", file=sys.stderr, flush=True)


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- SQLite FTS5 --------------------------------------------------------------------------------------


def _bigrams(text: str) -> str:
    def split(m: re.Match[str]) -> str:
        run = m.group()
        return " " + (run if len(run) == 1 else " ".join(run[i : i + 2] for i in range(len(run) - 1))) + " "

    return _CJK.sub(split, text)


class Fts5:
    """FTS5 BM25 over the same notes; CJK pre-split into bigrams, English stemmed by `porter`."""

    def __init__(self, notes: list[Note]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE notes USING fts5(path UNINDEXED, body, tokenize='porter unicode61')"
        )
        self.db.executemany("INSERT INTO notes VALUES (?, ?)", [(n.path, _bigrams(n.text)) for n in notes])
        self.db.commit()

    def search(self, question: str, prefix: str | None, limit: int = 10) -> list[str]:
        words = _WORD.findall(question.lower())
        tokens = dict.fromkeys(t for w in words for t in _bigrams(w).split())
        if not tokens:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)
        sql = "SELECT path FROM notes WHERE notes MATCH ?"
        args: list[object] = [match]
        if prefix:
            sql += " AND path LIKE ?"
            args.append(prefix + "%")
        rows = self.db.execute(sql + " ORDER BY bm25(notes) LIMIT ?", [*args, limit]).fetchall()
        return [r[0] for r in rows]


# -- measuring ------------------------------------------------------------------------------------------


@dataclass
class Recall:
    at5: int = 0
    at10: int = 0

    def add(self, found: list[str], answers: list[str]) -> None:
        self.at5 += any(a in found[:5] for a in answers)
        self.at10 += any(a in found[:10] for a in answers)


def _folder_of(paths: list[str]) -> str:
    return paths[0].split("/", 1)[0] + "/"


def write_folder(root: Path, notes: list[Note]) -> Path:
    folder = root / "notes"
    for n in notes:
        (folder / n.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / n.path).write_text(n.text, encoding="utf-8")
    (folder / "log").mkdir(parents=True, exist_ok=True)
    for name in ("svc.md", "http.md", "fresh.md"):
        (folder / "log" / name).write_text("# log\n", encoding="utf-8")
    return folder


def setup(data: Path, folder: Path) -> str:
    """The KB `qa` imported from `folder` and an agent `asker` with read_write; returns its token."""
    services = open_services(data)
    try:
        kbs.import_folder(services, ADMIN, SLUG, folder)
        _, token = agents.create(services, ADMIN, AGENT)
        agents.link(services, ADMIN, AGENT, SLUG, "read_write")
        return token
    finally:
        services.close()


def in_process(
    data: Path, notes: list[Note], questions: list[tuple[str, list[str]]], repeat: int
) -> dict[str, Any]:
    services = open_services(data)
    services.start()
    try:
        head = services.repos.repo(SLUG).head()
        search.status(services, ADMIN, SLUG, wait_for=head, timeout=60)
        caller = caller_for(services, AGENT)
        fts = Fts5(notes)
        out: dict[str, Any] = {}
        recall = {k: Recall() for k in ("kb", "kb_prefix", "fts", "fts_prefix")}
        latency: list[float] = []
        misses: list[str] = []
        for question, answers in questions:
            start = time.perf_counter()
            found = search.query(services, caller, SLUG, question, limit=10).hits
            latency.append(time.perf_counter() - start)
            paths = [h.path for h in found]
            recall["kb"].add(paths, answers)
            if not any(a in paths[:5] for a in answers):
                misses.append(question)
            folder = _folder_of(answers)
            under = search.query(services, caller, SLUG, question, limit=10, prefix=folder).hits
            recall["kb_prefix"].add([h.path for h in under], answers)
            recall["fts"].add(fts.search(question, None), answers)
            recall["fts_prefix"].add(fts.search(question, folder), answers)
        fts_latency = [timed(lambda q=q: fts.search(q, None)) for q, _ in questions]
        out["recall"], out["query"], out["fts_query"], out["misses"] = recall, latency, fts_latency, misses

        log(f"service-level writes: {repeat} one-file appends")
        out["write"] = [
            timed(
                lambda i=i: writes.submit(
                    services,
                    caller,
                    SLUG,
                    WriteRequest(files=[Append(path="log/svc.md", mode="append", content=f"- entry {i}\n")]),
                )
            )
            for i in range(repeat)
        ]
        log("commit -> searchable through the services")
        fresh, committed = [], []
        for i in range(min(repeat, 50)):
            word = f"freshword{i}q"
            start = time.perf_counter()
            result = writes.submit(
                services,
                caller,
                SLUG,
                WriteRequest(
                    files=[Overwrite(path="log/fresh.md", mode="overwrite", content=f"note {word}\n")]
                ),
            )
            committed.append(time.perf_counter() - start)
            # Wait on the index (an event, not a busy loop that would hold the GIL the indexer needs),
            # then search until the note is found.
            version = cast("Any", result).version
            search.status(services, caller, SLUG, wait_for=version, timeout=30)
            deadline = start + 30
            while time.perf_counter() < deadline:
                hits = search.query(services, caller, SLUG, word).hits
                if any(h.path == "log/fresh.md" for h in hits):
                    break
                time.sleep(0.001)
            fresh.append(time.perf_counter() - start)
        out["fresh_commit"] = committed
        out["fresh"] = fresh
        return out
    finally:
        services.close()


async def _mcp(
    url: str, token: str, questions: list[tuple[str, list[str]]], repeat: int
) -> dict[str, list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, list[float]] = {"noop": [], "search": []}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as hc:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=hc)) as client:
            for _ in range(5):  # warm-up
                await client.call_tool("noop", {})
                await client.call_tool("search_context", {"query": questions[0][0]})
            for round_ in range(max(1, repeat // len(questions)) + 1):
                for i, (question, _) in enumerate(questions):
                    start = time.perf_counter()
                    await client.call_tool("noop", {})
                    out["noop"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    result = await client.call_tool("search_context", {"query": question, "limit": 10})
                    out["search"].append(time.perf_counter() - start)
                    if result.is_error:
                        raise SystemExit(f"search_context failed: {result.content}")
                    if round_ * len(questions) + i >= repeat and round_:
                        break
    return out


def live(
    data: Path, token: str, questions: list[tuple[str, list[str]]], repeat: int, follower: str
) -> dict[str, list[float]]:
    """The live-server measures; `follower` embedded (serve indexes) or worker (`kbserver worker`)."""
    import httpx2

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    root = str(HERE.parent)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env["KBBENCH_FOLLOWER"] = follower
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.mcp", "--serve", str(data), str(port)], cwd=root, env=env
    )
    worker = None
    if follower == "worker":
        command = [sys.executable, "-m", "kbserver.cli", "worker", "--data", str(data)]
        worker = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_healthy(url, proc)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx2.Client(base_url=f"{url}/api/v1", headers=headers, timeout=60) as http:
            head = http.get(f"/kbs/{SLUG}").json()["head"]
            http.get(f"/kbs/{SLUG}/index", params={"wait_for": head, "timeout": 60}).raise_for_status()
            out: dict[str, list[float]] = {"healthz": [], "write": [], "fresh": []}
            for _ in range(5):
                http.get(f"{url}/healthz")
            for _ in range(repeat):
                out["healthz"].append(timed(lambda: http.get(f"{url}/healthz").raise_for_status()))
            log(f"HTTP writes: {repeat} one-file appends")
            for i in range(repeat):
                body = {"files": [{"path": "log/http.md", "mode": "append", "content": f"- entry {i}\n"}]}
                out["write"].append(
                    timed(lambda b=body: http.post(f"/kbs/{SLUG}/write", json=b).raise_for_status())
                )
            log("commit -> searchable over HTTP")
            for i in range(min(repeat, 50)):
                word = f"httpfresh{i}q"
                body = {"files": [{"path": "log/fresh.md", "mode": "overwrite", "content": f"note {word}\n"}]}
                start = time.perf_counter()
                version = http.post(f"/kbs/{SLUG}/write", json=body).json()["version"]
                http.get(f"/kbs/{SLUG}/index", params={"wait_for": version, "timeout": 30})
                while time.perf_counter() < start + 30:
                    hits = http.get(f"/kbs/{SLUG}/search", params={"q": word}).json()["hits"]
                    if any(h["path"] == "log/fresh.md" for h in hits):
                        break
                    time.sleep(0.0005)
                out["fresh"].append(time.perf_counter() - start)
        log("MCP: noop and search_context")
        out.update(asyncio.run(_mcp(url, token, questions, repeat)))
        return out
    finally:
        for child in (proc, worker):
            if child is not None:
                child.terminate()
                child.wait(timeout=30)


def _row(name: str, samples: list[float], target: str = "") -> str:
    return f"| {name} | {p(samples, 0.5):.2f} | {p(samples, 0.95):.2f} | {len(samples)} | {target} |"


def report(
    n_notes: int,
    questions: list[tuple[str, list[str]]],
    svc: dict[str, Any],
    srv: dict[str, list[float]],
    wrk: dict[str, list[float]],
) -> None:
    n = len(questions)
    rec = svc["recall"]
    zh = sum(1 for q, _ in questions if _CJK.search(q))
    print(
        f"\nquestion answering: {n_notes} notes, {n} questions ({n - zh} English, {zh} Chinese), "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, fsync on"
    )
    print("| engine | R@5 | R@10 | R@5 under the folder prefix | R@10 under the folder prefix |")
    print("|---|---|---|---|---|")
    for label, whole, under in (
        ("kbserver (Whoosh BM25F)", "kb", "kb_prefix"),
        ("SQLite FTS5 BM25, words ORed", "fts", "fts_prefix"),
    ):
        a, b = rec[whole], rec[under]
        print(f"| {label} | {a.at5 / n:.3f} | {a.at10 / n:.3f} | {b.at5 / n:.3f} | {b.at10 / n:.3f} |")
    svc_write = p(svc["write"], 0.5)
    print("\n| measure | p50 ms | p95 ms | samples | target |")
    print("|---|---|---|---|---|")
    print(_row("search, services (search.query, limit 10)", svc["query"]))
    print(_row("search, SQLite FTS5 (same questions)", svc["fts_query"]))
    print(_row("write, services (writes.submit, 1-file append, embedded indexer)", svc["write"]))
    fresh = p(svc["fresh"], 0.5)
    print(_row("commit -> searchable, services", svc["fresh"], f"<= 30: {'ok' if fresh <= 30 else 'MISSED'}"))
    print(_row("  of which the write (writes.submit)", svc["fresh_commit"]))
    for mode, res in (("embedded follower", srv), ("kbserver worker", wrk)):
        noop, mcp_search, http_write = p(res["noop"], 0.5), p(res["search"], 0.5), p(res["write"], 0.5)
        print(_row(f"[{mode}] MCP noop (baseline)", res["noop"]))
        verdict = "ok" if mcp_search <= 2 * noop else "MISSED"
        print(_row(f"[{mode}] MCP search_context", res["search"], f"<= 2 x noop = {2 * noop:.2f}: {verdict}"))
        print(_row(f"[{mode}] HTTP GET /healthz (baseline)", res["healthz"]))
        verdict = "ok" if http_write <= svc_write + 3 else "MISSED"
        target = f"<= services + 3 = {svc_write + 3:.2f}: {verdict}"
        print(_row(f"[{mode}] write, HTTP POST /write (same append)", res["write"], target))
        print(_row(f"[{mode}] commit -> searchable, HTTP (write, wait_for, search)", res["fresh"]))
    if svc["misses"]:
        print(f"\nkbserver misses at 5 ({len(svc['misses'])}): " + "; ".join(svc["misses"][:20]))


def main(repeat: int) -> None:
    notes, questions = load()
    with tempfile.TemporaryDirectory(prefix="kb-bench-qa-") as tmp:
        root = Path(tmp)
        folder = write_folder(root, notes)
        log(f"{len(notes)} notes, {len(questions)} questions; importing")
        setup(root / "data-svc", folder)
        svc = in_process(root / "data-svc", notes, questions, repeat)
        token = setup(root / "data-srv", folder)
        srv = live(root / "data-srv", token, questions, repeat, "embedded")
        token = setup(root / "data-worker", folder)
        log("again with the index followed by `kbserver worker`")
        wrk = live(root / "data-worker", token, questions, repeat, "worker")
    report(len(notes), questions, svc, srv, wrk)
