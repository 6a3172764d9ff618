"""The writer never removes a live `main.lock`: another program holding it (C git's update-ref, a
writer whose flock was lost) keeps it until it renames it onto main, and the write waits, then
re-applies on the new head. Only a lock file left unchanged for LOCK_STALE_SECONDS is a crash's."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kbserver.store import CommitPlan, Repos, locks
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"

# Git's ref protocol, as C git and dulwich follow it: main.lock created exclusively, the new id in
# it, then renamed onto main; it holds the lock a second (a slow disk, a busy machine).
HOLDER = """
import os, sys, time
ref = os.path.join(sys.argv[1], "refs", "heads", "main")
fd = os.open(ref + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, (sys.argv[2] + "\\n").encode())
os.close(fd)
print("locked", flush=True)
time.sleep(1.0)
try:
    os.rename(ref + ".lock", ref)
    print("moved", flush=True)
except OSError as err:
    print(f"lost: {err!r}", flush=True)
"""


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    r = Repos(tmp_path / "kbs")
    r.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    return r


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, text=True).stdout.strip()


def test_a_live_ref_lock_of_another_program_is_waited_for_never_removed(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    path = repos.path("demo")
    head = repo.head() or ""
    other = _git(path, "commit-tree", "-p", head, "-m", "by hand", _git(path, "rev-parse", head + "^{tree}"))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), other], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    outcome: list[object] = []
    write = threading.Thread(
        target=lambda: outcome.append(
            writer.submit(lambda _tip: CommitPlan({"mine.md": b"mine\n"}, "mine", AUTHOR))
        )
    )
    write.start()
    said = holder.stdout.read()
    holder.wait(timeout=60)
    write.join(timeout=120)
    assert said == "moved\n", said  # today: the writer removed the live lock (FileNotFoundError)
    version, parent, _ = outcome[0]  # type: ignore[misc]
    assert parent == other and repo.head() == version  # the write re-applied on the other's commit
    assert _git(path, "log", "--format=%s", "-3", "main").splitlines() == [
        "mine",
        "by hand",
        "create KB demo",
    ]
    git_fsck(path)


def test_a_ref_lock_left_by_a_crash_is_removed_once_it_stays_unchanged(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks, "LOCK_STALE_SECONDS", 0.5)
    repo, writer = repos.get("demo")
    lock = repos.path("demo") / "refs" / "heads" / "main.lock"
    lock.write_text("left by a crash\n")
    version, _, _ = writer.submit(lambda _tip: CommitPlan({"a.md": b"a\n"}, "a", AUTHOR))
    assert repo.head() == version and not lock.exists()
    git_fsck(repos.path("demo"))
