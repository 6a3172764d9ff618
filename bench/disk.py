"""Benchmark of disk use per memory add: today's packing (whole objects) next to C git's deltas.

A KB with `--memories` memories in `memories/` (built once with C git's fast-import), then
`--adds` adds of one new memory each through the store's writer (the commit a `memory_add` makes:
one blob, the 470 kB tree of the folder at 10,000 memories, the root tree, the commit), on copies
of that KB, one per packing policy:

- `dulwich (before)`: the writer of the previous release: loose objects, and every 1,000 commits
  a background `pack_loose_objects()`, which packs without deltas.
- `git geometric (after)`: the writer's packer (kbserver.store.packing): `git repack --geometric=2
  -d` in the background every 1,000 commits or 64 MiB of loose objects.

Each policy packs once more after the adds (what stays on disk), and the geometric run then does
one `git repack -a -d -f` (the rare full repack, every delta computed again).

Prints, per policy: bytes on disk per add (growth of objects/ over the adds, divided by the adds),
the largest loose backlog seen, the total, the time repacks took, and the add's p50/p95 with and
without a repack running beside it, and what reads cost once packed (a file at an old version, a
diff, the history of one path; each on a freshly opened repository). Everything runs in a temp folder.

Then, on the loose objects of `--deltify` more adds, dulwich's own delta packing
(`write_pack_objects(..., deltify=True)`, pure Python but for the delta itself) next to C git's.

    python -m bench.disk [--memories 10000] [--adds 1000] [--fsync] [--deltify 200]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.object_store import DiskObjectStore
from dulwich.pack import write_pack_objects
from dulwich.repo import Repo

from kbserver.store import CommitPlan, KBRepo
from kbserver.store.packing import mark_deltified, pack_stats, repack
from kbserver.store.writer import Writer

AUTHOR = "agent:bench <bench@kbserver.invalid>"
OLD_PACK_EVERY = 1000


def memory(i: int, rnd: random.Random) -> tuple[str, bytes]:
    mid = f"{rnd.getrandbits(64):016x}"
    text = (
        f"---\nid: {mid}\ncategory: note\ntags: [bench]\ncreatedAt: '2026-11-30T10:00:00Z'\n"
        f"updatedAt: '2026-11-30T10:00:00Z'\n---\nMemory {i}: the user prefers tea number {i % 97}.\n"
    )
    return f"memories/{mid}.md", text.encode()


def seed(path: Path, n: int) -> None:
    """A bare KB with `n` memories in one commit, packed (C git's fast-import)."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    rnd = random.Random(7)
    out = [b"commit refs/heads/main\ncommitter bench <b@x> 1700000000 +0000\ndata 5\nseed\n"]
    for i in range(n):
        p, data = memory(i, rnd)
        out.append(f"M 100644 inline {p}\ndata {len(data)}\n".encode() + data + b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=b"".join(out), check=True)
    mark_deltified(str(path))  # a new KB, as Repos.create makes it: no full repack first


def old_pack_loose(path: str) -> None:
    """The previous release's `pack_loose`: dulwich packs the loose objects whole."""
    with Repo(path) as git:
        store = git.object_store
        assert isinstance(store, DiskObjectStore)
        store.fsync_object_files = True
        store.pack_loose_objects()


@dataclass
class Run:
    name: str
    seed_bytes: int
    adds: int = 0
    during: list[float] = field(default_factory=list)  # add latencies while a repack ran
    idle: list[float] = field(default_factory=list)
    max_loose: int = 0
    repack_seconds: list[float] = field(default_factory=list)
    total: int = 0  # right after the adds (with what is still loose)
    packed: int = 0  # after one more pack of the same policy
    packed_seconds: float = 0.0
    packs: int = 0
    full: int | None = None  # after `git repack -a -d -f`
    full_seconds: float | None = None
    reads: str = ""  # read costs once packed


def run(name: str, base: Path, copy: Path, adds: int, fsync: bool) -> Run:
    shutil.copytree(base, copy)
    path = str(copy)
    result = Run(name, pack_stats(path).total_bytes)
    repo = KBRepo(path)
    writer = Writer(repo, fsync=fsync)
    old = name.startswith("dulwich")
    if old:
        writer.packer.every_commits = writer.packer.every_bytes = 1 << 62
    old_thread: threading.Thread | None = None
    old_seconds: list[float] = []

    def timed_old() -> None:
        began = time.monotonic()
        old_pack_loose(path)
        old_seconds.append(time.monotonic() - began)

    rnd = random.Random(11)
    added: list[tuple[str, str, bytes]] = []
    for i in range(adds):
        p, data = memory(10**6 + i, rnd)
        busy = (old_thread is not None and old_thread.is_alive()) or writer.packer.running
        began = time.perf_counter()
        version, _, _ = writer.submit(
            lambda _tip, p=p, data=data: CommitPlan({p: data}, f"memory add: {p}", AUTHOR)
        )
        added.append((version, p, data))
        (result.during if busy else result.idle).append(time.perf_counter() - began)
        if old and (i + 1) % OLD_PACK_EVERY == 0 and (old_thread is None or not old_thread.is_alive()):
            old_thread = threading.Thread(target=timed_old)
            old_thread.start()
        if i % 25 == 0:
            result.max_loose = max(result.max_loose, pack_stats(path).loose_bytes)
    if old_thread is not None:
        old_thread.join()
    writer.packer.wait()
    result.max_loose = max(result.max_loose, pack_stats(path).loose_bytes)
    result.repack_seconds = old_seconds if old else writer.packer.seconds
    writer.close()
    repo.close()
    result.total, result.adds = pack_stats(path).total_bytes, adds
    began = time.monotonic()
    if old:
        old_pack_loose(path)
    else:
        assert repack(path) is not None
    result.packed_seconds = time.monotonic() - began
    stats = pack_stats(path)
    result.packed, result.packs = stats.total_bytes, stats.packs
    result.reads = reads(path, added)
    if not old:
        done = repack(path, full=True)
        assert done is not None
        result.full, result.full_seconds = done.after.total_bytes, done.seconds
    return result


def deltify_side_by_side(base: Path, copy: Path, adds: int) -> list[str]:
    """dulwich's own delta packing next to C git's, on the loose objects of `adds` adds."""
    shutil.copytree(base, copy)
    repo = KBRepo(str(copy))
    writer = Writer(repo, fsync=False)
    writer.packer.every_commits = writer.packer.every_bytes = 1 << 62
    rnd = random.Random(13)
    for i in range(adds):
        p, data = memory(2 * 10**6 + i, rnd)
        writer.submit(lambda _tip, p=p, data=data: CommitPlan({p: data}, f"memory add: {p}", AUTHOR))
    writer.close()
    repo.close()
    lines = []
    with Repo(str(copy)) as git:
        store = git.object_store
        assert isinstance(store, DiskObjectStore)
        objects = [o for o in (store._get_loose_object(sha) for sha in store._iter_loose_objects()) if o]
        for deltify in (False, True):
            out = io.BytesIO()
            began = time.monotonic()
            write_pack_objects(out.write, [(o, None) for o in objects], store.object_format, deltify=deltify)
            took = time.monotonic() - began
            size = f"{len(out.getvalue()) / 1000:.0f} kB"
            lines.append(f"dulwich write_pack_objects(deltify={deltify}): {size} in {took:.1f} s")
    seed_pack = pack_stats(str(copy)).pack_bytes
    done = repack(str(copy))
    assert done is not None
    size = f"{(done.after.pack_bytes - seed_pack) / 1000:.0f} kB"
    lines.append(f"git repack --geometric=2 -d: {size} in {done.seconds:.1f} s")
    shutil.rmtree(copy)
    return [f"packing the {len(objects)} loose objects of {adds} adds: {line}" for line in lines]


def reads(path: str, added: list[tuple[str, str, bytes]]) -> str:
    """What reading costs once packed, each on a freshly opened repository (cold caches)."""
    sample = random.Random(1).sample(added, min(100, len(added)))
    repo = KBRepo(path)
    began = time.perf_counter()
    for version, p, data in sample:
        assert repo.view(version).read(p) == data
    read_ms = (time.perf_counter() - began) / len(sample) * 1000
    repo.close()
    repo = KBRepo(path)
    began = time.perf_counter()
    for version, _, _ in sample[:50]:
        repo.changes(repo.commit_info(version).parent, version)
    diff_ms = (time.perf_counter() - began) / len(sample[:50]) * 1000
    repo.close()
    repo = KBRepo(path)
    head = repo.head()
    assert head is not None
    began = time.perf_counter()
    history = list(repo.path_history(head, added[0][1]))
    history_s = time.perf_counter() - began
    repo.close()
    assert len(history) == 1
    return (
        f"read of a file at an old version {read_ms:.1f} ms, diff of a version {diff_ms:.1f} ms, "
        f"history of one path over {len(added) + 1} versions {history_s:.1f} s"
    )


def pct(samples: list[float], q: float) -> str:
    if not samples:
        return "-"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


POLICIES = ["dulwich (before)", "git geometric (after)"]
COLUMNS = [
    "policy",
    "on disk after the adds (per add)",
    "largest loose backlog",
    "once packed: total (per add)",
    "packs",
    "repacks during the adds (s)",
    "add p50/p95 idle (ms)",
    "add p50/p95 during a repack (ms)",
]


def per_add(r: Run, total: int) -> str:
    return f"{mb(total)} ({(total - r.seed_bytes) / r.adds / 1000:.1f} kB)"


def rows(r: Run) -> list[list[str]]:
    s = sorted(r.repack_seconds)
    repacks = ", ".join(f"{x:.1f}" for x in r.repack_seconds) or "-"
    if len(s) > 6:
        repacks = f"{len(s)} runs, median {s[len(s) // 2]:.1f}, max {s[-1]:.1f}"
    out = [
        [
            r.name,
            per_add(r, r.total),
            mb(r.max_loose),
            f"{per_add(r, r.packed)} in {r.packed_seconds:.1f} s",
            str(r.packs),
            repacks,
            f"{pct(r.idle, 0.5)} / {pct(r.idle, 0.95)} (n={len(r.idle)})",
            f"{pct(r.during, 0.5)} / {pct(r.during, 0.95)} (n={len(r.during)})",
        ]
    ]
    if r.full is not None and r.full_seconds is not None:
        full = f"{per_add(r, r.full)} in {r.full_seconds:.1f} s"
        out.append(["then `git repack -a -d -f`", "", "", full, "1"])
        out[-1] += [""] * (len(COLUMNS) - len(out[-1]))
    return out


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--adds", type=int, default=1000)
    parser.add_argument("--fsync", action="store_true", help="fsync each add (the server's default)")
    parser.add_argument(
        "--deltify", type=int, default=200, help="adds whose loose objects dulwich deltifies (0: skip; slow)"
    )
    args = parser.parse_args()
    print(f"load before: {load()} (1/5/15 min, 2 shared cores)")
    runs = []
    with tempfile.TemporaryDirectory(prefix="kbserver-disk-") as tmp:
        base = Path(tmp) / "seed.git"
        began = time.monotonic()
        seed(base, args.memories)
        size = mb(pack_stats(str(base)).total_bytes)
        print(f"seed: {args.memories} memories, {size}, {time.monotonic() - began:.1f} s")
        for i, name in enumerate(POLICIES):
            copy = Path(tmp) / f"kb{i}.git"
            runs.append(run(name, base, copy, args.adds, args.fsync))
            shutil.rmtree(copy)
            print(f"  done: {name} (load {load()})", flush=True)
        deltify = deltify_side_by_side(base, Path(tmp) / "deltify.git", args.deltify) if args.deltify else []
    print()
    print(f"{args.memories} memories, {args.adds} adds, fsync {'on' if args.fsync else 'off'}")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in runs:
        for cells in rows(r):
            print("| " + " | ".join(cells) + " |")
    for r in runs:
        print(f"reads once packed, {r.name}: {r.reads} (fresh repository each)")
    for line in deltify:
        print(line)
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
