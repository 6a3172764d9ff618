"""A frozen process never holds a KB hostage: a writer lock held by a process that does not progress
(SIGSTOPped, partitioned) is taken over after STALE_SECONDS, and when the old holder runs again its
commit is refused at the ref by its stale fencing token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kbserver.store import CommitPlan, Repos
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")

# Another node's writer: one write of `path`; says "in job" each time its job runs.
WRITE = """
import sys
from pathlib import Path
from kbserver.core.errors import Busy
from kbserver.store import CommitPlan, Repos
repos = Repos(Path(sys.argv[1]), wait=float(sys.argv[3]))
_, writer = repos.get("demo")
def job(_tip):
    print("in job", flush=True)
    return CommitPlan({sys.argv[2]: b"frozen\\n"}, "frozen write", "agent:a <a@kbserver.invalid>")
try:
    version, _, _ = writer.submit(job)
    print("written", version, flush=True)
except Busy as err:
    print("busy:", err.message, flush=True)
"""


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    r = Repos(tmp_path / "kbs", wait=120)
    r.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    return r


def _writer(root: Path, path: str, wait: float = 300) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITE, str(root), path, str(wait)], stdout=subprocess.PIPE, text=True, env=env
    )


def _write(repos: Repos, path: str) -> str:
    _, writer = repos.get("demo")
    version, _, _ = writer.submit(lambda _tip: CommitPlan({path: b"live\n"}, f"write {path}", AUTHOR))
    return version


def test_a_holder_frozen_in_its_write_is_taken_over_and_its_commit_refused(
    repos: Repos, tmp_path: Path
) -> None:
    frozen = _writer(tmp_path / "kbs", "frozen.md")
    assert frozen.stdout is not None
    try:
        assert frozen.stdout.readline() == "in job\n"  # it holds the KB's writer lock now
        os.kill(frozen.pid, signal.SIGSTOP)
        version = _write(repos, "live.md")  # today: Busy for as long as the other stays frozen
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    out, _ = frozen.communicate(timeout=120)
    assert out.splitlines()[-1].startswith("busy:") and "taken over" in out, out  # refused at the ref
    repo = repos.repo("demo")
    assert repo.head() == version
    assert repo.view(version).read("live.md") == b"live\n" and repo.view(version).read("frozen.md") is None
    assert _write(repos, "after.md")  # and the KB is writable as before
    git_fsck(repos.path("demo"))


def test_a_holder_frozen_past_its_own_wait_is_told_it_was_taken_over(repos: Repos, tmp_path: Path) -> None:
    """Thawed after its whole write wait, the old holder is told its lock was taken over (nothing
    committed), not that another write held the KB for longer than its wait: it was the one holding."""
    frozen = _writer(tmp_path / "kbs", "frozen.md", wait=2)
    assert frozen.stdout is not None
    try:
        assert frozen.stdout.readline() == "in job\n"
        os.kill(frozen.pid, signal.SIGSTOP)
        version = _write(repos, "live.md")  # after STALE_SECONDS: well past the frozen one's wait
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    out, _ = frozen.communicate(timeout=120)
    assert out.splitlines()[-1].startswith("busy:") and "taken over" in out, out  # today: "held it for"
    repo = repos.repo("demo")
    assert repo.head() == version and repo.view(version).read("frozen.md") is None
    git_fsck(repos.path("demo"))
