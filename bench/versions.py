"""Benchmark of the "version must be on main" check, each with a cache as a new process has it
(cold): the first version (walks the whole history), a version 10 back, a side commit on a
version 10 back (what a pending proposal is); then warm (cached) and after main gained 10 commits;
next to `git merge-base --is-ancestor`.

    python bench/versions.py [--commits 1000,10000,50000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kbserver.store import KBRepo


def build(repo: Path, commits: int) -> None:
    """A bare repository whose main has `commits` one-file commits, made by C git's fast-import."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    out = []
    for i in range(commits):
        data = f"note {i}\n".encode()
        msg = f"write {i}".encode()
        out += [
            b"commit refs/heads/main\n",
            f"committer bench <b@x> {1_700_000_000 + i} +0000\n".encode(),
            b"data %d\n%s\n" % (len(msg), msg),
            b"M 100644 inline n%d.md\n" % (i % 100),
            b"data %d\n%s\n" % (len(data), data),
        ]
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(out), check=True)


def ms(fn: object, runs: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000 / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", default="1000,10000,50000")
    args = parser.parse_args()
    print(
        "| commits | cold: first version (ms) | cold: 10 back (ms) | cold: side commit (ms) | warm (µs) "
        "| after 10 new commits (ms) | git is-ancestor (ms) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (int(x) for x in args.commits.split(",")):
        print(row(n))


def row(n: int) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="kb-bench-versions-"))
    try:
        path = tmp / "r.git"
        build(path, n)
        log = subprocess.run(
            ["git", "log", "--format=%H", "main"], cwd=path, capture_output=True, text=True, check=True
        ).stdout.split()
        oldest, newest = log[-1], log[0]
        side = subprocess.run(
            ["git", "commit-tree", "-p", log[10], "-m", "side", log[10] + "^{tree}"],
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        recent = KBRepo(str(path))
        cold_recent = ms(lambda: recent.on_main(log[10]))
        recent.close()
        proposal = KBRepo(str(path))
        cold_side = ms(lambda: proposal.on_main(side))
        assert not proposal.on_main(side)
        proposal.close()
        repo = KBRepo(str(path))
        cold = ms(lambda: repo.on_main(oldest))
        warm = ms(lambda: repo.on_main(oldest), 1000) * 1000
        script = "".join(
            f"commit refs/heads/main\ncommitter b <b@x> {1_800_000_000 + i} +0000\ndata 1\nx\n"
            + ("from refs/heads/main^0\n" if i == 0 else "")
            + f"M 100644 inline new{i}.md\ndata 2\ny\n"
            for i in range(10)
        )
        subprocess.run(["git", "fast-import", "--quiet"], cwd=path, input=script.encode(), check=True)
        grown = ms(lambda: repo.on_main(newest))
        git = ms(
            lambda: subprocess.run(
                ["git", "merge-base", "--is-ancestor", oldest, "main"], cwd=path, check=True
            ),
            5,
        )
        repo.close()
        cells = (
            f"{cold:.1f}",
            f"{cold_recent:.2f}",
            f"{cold_side:.2f}",
            f"{warm:.1f}",
            f"{grown:.2f}",
            f"{git:.1f}",
        )
        return f"| {n} | " + " | ".join(cells) + " |"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
