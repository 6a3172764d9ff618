"""Bounded waits of the writer: a KB held elsewhere answers Busy and changes nothing; the group
commit's leader commits one batch, then hands the lead to the next caller."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kbserver.core.errors import Busy
from kbserver.store import CommitPlan, Repos, TreeView
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"

HOLD_LOCK = """
import sys
from kbserver.store.writer import kb_lock
with kb_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def hold_writer_lock(repo_path: Path) -> subprocess.Popen[str]:
    """Another process holding the KB's writer lock until its stdin is closed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(repo_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def let_go(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=60)


def put(path: str, ran_in: dict[str, int] | None = None, hold: threading.Event | None = None) -> object:
    def job(_tip: TreeView) -> CommitPlan:
        if ran_in is not None:
            ran_in[path] = threading.get_ident()
        if hold is not None:
            assert hold.wait(120), "the test never let the job go"
        return CommitPlan({path: path.encode()}, f"write {path}", AUTHOR, {"Kb-Kind": "agent_write"})

    return job


def test_writes_to_a_kb_held_elsewhere_are_busy_and_change_nothing(tmp_path: Path) -> None:
    repos = Repos(tmp_path / "kbs", wait=0.3)
    repos.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    repo, writer = repos.get("demo")
    head = repo.head()
    holder = hold_writer_lock(repos.path("demo"))
    outcomes: list[str] = []

    def write(n: int) -> None:
        try:
            writer.submit(put(f"w{n}.md"))  # type: ignore[arg-type]
            outcomes.append("written")
        except Busy as err:
            assert err.retry_after >= 1 and "busy" in err.message
            outcomes.append(err.code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]  # a leader and a queue
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive()
    assert outcomes == ["busy"] * 4
    assert repo.head() == head and sorted(p for p, _ in repo.view(repo.head()).walk()) == ["README.md"]
    with pytest.raises(Busy):  # a proposal's commit too
        writer.propose(put("p.md"), "refs/proposals/p1")  # type: ignore[arg-type]
    assert repo.git.refs.as_dict(b"refs/proposals") == {}
    let_go(holder)
    version, parent, _ = writer.submit(put("after.md"))  # type: ignore[arg-type]
    assert parent == head and repo.head() == version  # the writer serves again
    git_fsck(repos.path("demo"))


def test_the_leader_commits_its_batch_then_hands_over(tmp_path: Path) -> None:
    repos = Repos(tmp_path / "kbs")
    repos.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    repo, writer = repos.get("demo")
    ran_in: dict[str, int] = {}
    callers: dict[str, int] = {}
    hold = threading.Event()

    def write(path: str, job: object) -> None:
        callers[path] = threading.get_ident()
        writer.submit(job)  # type: ignore[arg-type]

    leader = threading.Thread(target=write, args=("lead.md", put("lead.md", ran_in, hold)))
    leader.start()
    deadline = time.monotonic() + 60
    while "lead.md" not in ran_in:  # the leader is committing its batch (its job waits for `hold`)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    others = [threading.Thread(target=write, args=(p, put(p, ran_in))) for p in ("b.md", "c.md")]
    for t in others:
        t.start()
    while len(writer._queue) < 2:  # both queued behind the leader's batch
        assert time.monotonic() < deadline
        time.sleep(0.01)
    hold.set()
    for t in [leader, *others]:
        t.join(timeout=120)
        assert not t.is_alive()
    assert ran_in["lead.md"] == callers["lead.md"]
    # the next batch ran in the thread of one of its own callers, not in the first leader's
    assert ran_in["b.md"] == ran_in["c.md"] != callers["lead.md"]
    assert ran_in["b.md"] in (callers["b.md"], callers["c.md"])
    assert len(list(repo.first_parents(repo.head()))) == 4
    git_fsck(repos.path("demo"))
