"""Store: commits along changed paths only, CAS of main, group commit, lock recovery, crash leftovers."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from kbserver.core.errors import InvalidRequest, Stale
from kbserver.store import CommitPlan, Repos, TreeView
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    r = Repos(tmp_path / "kbs")
    r.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    return r


def put(changes: dict[str, bytes | None], message: str = "write") -> object:
    return lambda _tip: CommitPlan(changes, message, AUTHOR, {"Kb-Kind": "agent_write"})


def test_create_is_a_bare_repo_on_main(repos: Repos) -> None:
    path = repos.path("demo")
    assert not (path / "README.md").exists() and (path / "HEAD").read_text().strip() == "ref: refs/heads/main"
    repo = repos.repo("demo")
    assert repo.view(repo.head()).read("README.md") == b"# Demo\n"
    assert repo.commit_info(repo.head()).trailers["Kb-Kind"] == "create"
    git_fsck(path)
    out = subprocess.run(["git", "log", "--format=%an|%s", "main"], cwd=path, capture_output=True, text=True)
    assert out.stdout.strip() == "admin|create KB demo" or out.stdout.startswith("agent:test|")


def test_commit_touches_only_changed_paths(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    writer.submit(put({f"d{i}/e/f.md": b"x" for i in range(5)}))
    before = repo.view(repo.head())
    untouched = {p: before.blob_id(p) for p in ("d1/e/f.md", "d2/e/f.md")}
    tree_d1 = before.entry("d1")
    version, parent, _ = writer.submit(put({"d0/e/f.md": b"changed"}))
    after = repo.view(version)
    assert parent == before.version
    assert {p: after.blob_id(p) for p in untouched} == untouched
    assert after.entry("d1") == tree_d1  # sibling subtree reused, not rewritten
    assert [c.path for c in repo.changes(parent, version)] == ["d0/e/f.md"]
    git_fsck(repos.path("demo"))


def test_job_errors_change_nothing(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    head = repo.head()

    def stale(_tip: TreeView) -> CommitPlan:
        raise Stale("README.md changed", path="README.md")

    with pytest.raises(Stale):
        writer.submit(stale)
    for bad in ({"README.md/x.md": b"x"}, {"missing.md": None}):
        with pytest.raises(InvalidRequest):
            writer.submit(put(bad))
    assert repo.head() == head


def test_concurrent_writers_lose_nothing(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                writer.submit(put({f"w{n}/{i}.md": f"{n}-{i}".encode()}))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    files = dict(repo.view(repo.head()).walk())
    assert len(files) == 81
    assert len(list(repo.first_parents(repo.head()))) == 81  # one version per call, group commit or not
    git_fsck(repos.path("demo"))


def test_appends_race_resolved_under_the_lock(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    writer.submit(put({"log.md": b""}))

    def append(tip: TreeView) -> CommitPlan:
        current = tip.read("log.md") or b""
        return CommitPlan({"log.md": current + b"line\n"}, "append", AUTHOR)

    threads = [threading.Thread(target=lambda: [writer.submit(append) for _ in range(10)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert repo.view(repo.head()).read("log.md") == b"line\n" * 40


def test_stale_ref_lock_is_recovered(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    lock = repos.path("demo") / "refs" / "heads" / "main.lock"
    lock.write_text("garbage")
    objlock = repos.path("demo") / "objects" / "ab.lock"
    objlock.write_text("")
    removed = repos.recover("demo")
    assert str(lock) in removed and not lock.exists()
    lock.write_text("garbage")  # left behind again: the writer itself recovers
    version, _, _ = writer.submit(put({"a.md": b"a"}))
    assert repo.head() == version and not lock.exists()
    git_fsck(repos.path("demo"))


def test_head_moved_by_another_process_is_seen(repos: Repos, tmp_path: Path) -> None:
    repo, writer = repos.get("demo")
    other = Repos(tmp_path / "kbs")  # a second, independent opener (like a second process)
    _, other_writer = other.get("demo")
    v1, _, _ = other_writer.submit(put({"from-other.md": b"x"}))
    assert repo.head() == v1  # never a cached head
    v2, parent, _ = writer.submit(put({"mine.md": b"y"}))
    assert parent == v1
    assert {p for p, _ in repo.view(v2).walk()} == {"README.md", "from-other.md", "mine.md"}
    other.close()


def test_proposal_ref_does_not_move_main(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    head = repo.head()
    commit, base, _ = writer.propose(put({"p.md": b"proposed"}), "refs/proposals/p1")
    assert base == head and repo.head() == head
    assert repo.view(commit).read("p.md") == b"proposed"
    assert os.path.exists(repos.path("demo") / "refs" / "proposals" / "p1")
    git_fsck(repos.path("demo"))


@pytest.mark.parametrize(
    "path", [".git/config", "a/.GIT/x", "git~1/x", ".git./x", ".g\u200cit/x", ".git::$INDEX_ALLOCATION/x"]
)
def test_git_refuses_these_names_and_so_does_the_store(repos: Repos, path: str) -> None:
    """Even when a caller skips the path rules above the store, git's own checks hold."""
    repo, writer = repos.get("demo")
    head = repo.head()
    with pytest.raises(InvalidRequest):
        writer.submit(put({path: b"x"}))
    assert repo.head() == head
