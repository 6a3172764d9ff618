"""Fault injection in the writer: a job with a bug inside a batch, failing flushes before and after
main moved, main moved by C git in the middle of a write."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kbserver.store import CommitPlan, Repos, TreeView
from kbserver.store import writer as writer_module
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    r = Repos(tmp_path / "kbs")
    r.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    return r


def _put(path: str) -> writer_module.Job:
    return lambda _tip: CommitPlan({path: f"{path}\n".encode()}, f"write {path}", AUTHOR)


def test_a_bug_in_one_job_fails_only_its_own_caller(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    release = threading.Event()
    outcomes: dict[str, object] = {}

    def blocking(tip: TreeView) -> CommitPlan:
        release.wait(timeout=60)  # holds the leader, so the next jobs queue up as one batch
        return _put("first.md")(tip)

    def buggy(_tip: TreeView) -> CommitPlan:
        raise RuntimeError("a bug in a job")

    def run(name: str, job: writer_module.Job) -> None:
        try:
            outcomes[name] = writer.submit(job)[0]
        except Exception as exc:
            outcomes[name] = exc

    first = threading.Thread(target=run, args=("first", blocking))
    first.start()
    for _ in range(600):  # bounded: until the leader runs the blocking job
        if writer._leading and not writer._queue:
            break
        time.sleep(0.01)
    batch = [("a", _put("a.md")), ("bug", buggy), ("b", _put("b.md")), ("c", _put("c.md"))]
    threads = [threading.Thread(target=run, args=item) for item in batch]
    for t in threads:
        t.start()
        for _ in range(600):  # in order, so the buggy job sits in the middle of the batch
            if len(writer._queue) == threads.index(t) + 1:
                break
            time.sleep(0.01)
    assert len(writer._queue) == 4
    release.set()
    for t in [first, *threads]:
        t.join(timeout=60)
    assert isinstance(outcomes["bug"], RuntimeError)
    versions = [outcomes[name] for name in ("first", "a", "b", "c")]
    assert all(isinstance(v, str) for v in versions), outcomes
    head = repo.head()
    assert head == versions[-1]
    assert sorted(p for p, _ in repo.view(head).walk()) == ["README.md", "a.md", "b.md", "c.md", "first.md"]
    assert list(repo.first_parents(head))[:4] == versions[::-1]  # each its own commit, in order
    git_fsck(repos.path("demo"))


def test_a_failing_fsync_of_the_ref_folder_after_main_moved_is_not_an_error(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, writer = repos.get("demo")
    real = writer_module.fsync_path  # the writer's fsync of main's folder once main moved
    failures: list[str] = []

    def flaky(path: str) -> None:
        if path.endswith(os.path.join("refs", "heads")):
            failures.append(path)
            raise OSError(5, "Input/output error")  # as a failing disk would say
        real(path)

    monkeypatch.setattr(writer_module, "fsync_path", flaky)
    version, _, _ = writer.submit(_put("after.md"))
    assert failures  # the fault was hit, after main moved
    assert repo.head() == version and repo.view(version).read("after.md") == b"after.md\n"
    monkeypatch.setattr(writer_module, "fsync_path", real)
    assert writer.submit(_put("next.md"))[1] == version  # and the writer goes on
    git_fsck(repos.path("demo"))


def test_a_failing_flush_before_main_moves_fails_the_write_and_changes_nothing(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One flush makes the new objects and the new ref's bytes durable before the rename onto main:
    # when it fails, main must not move and its lock must not stay behind.
    repo, writer = repos.get("demo")
    head = repo.head()
    real = writer_module.sync_files
    seen: list[list[str]] = []

    def failing(anchor: str, paths: list[str], nameless: list[str]) -> None:
        seen.append([*paths, *nameless])
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(writer_module, "sync_files", failing)
    with pytest.raises(OSError):
        writer.submit(_put("lost.md"))
    heads = os.path.join("refs", "heads", "")
    assert any(re.search(r"refs/heads/main\.f\d+\.lock$", p) for p in seen[0]), seen  # the ref too
    assert repo.head() == head
    lock = repos.path("demo") / "refs" / "heads" / "main.lock"
    assert not lock.exists() and list((repos.path("demo") / heads).glob("*.lock")) == []
    monkeypatch.setattr(writer_module, "sync_files", real)
    version, parent, _ = writer.submit(_put("next.md"))
    assert parent == head and repo.view(version).read("lost.md") is None
    git_fsck(repos.path("demo"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs C git")
def test_main_moved_by_c_git_between_the_job_and_the_swap_reapplies_the_write(repos: Repos) -> None:
    repo, writer = repos.get("demo")
    path = repos.path("demo")
    calls: list[str | None] = []

    def job(tip: TreeView) -> CommitPlan:
        calls.append(tip.version)
        if len(calls) == 1:  # C git moves main under us (it takes main.lock, not our flock)
            head = tip.version or ""
            tree = _git(path, "rev-parse", head + "^{tree}")
            other = _git(path, "commit-tree", "-p", head, "-m", "by hand", tree)
            _git(path, "update-ref", "refs/heads/main", other, head)
        return CommitPlan({"mine.md": b"mine\n"}, "mine", AUTHOR)

    version, parent, _ = writer.submit(job)
    assert len(calls) == 2 and calls[1] == parent != calls[0]  # re-applied on C git's commit
    assert repo.head() == version
    assert _git(path, "log", "--format=%s", "-2", "main").splitlines() == ["mine", "by hand"]
    git_fsck(path)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, text=True).stdout.strip()


def test_lock_files_a_killed_writer_left_on_loose_objects_do_not_fail_the_next_write(
    repos: Repos, tmp_path: Path
) -> None:
    """A node killed while writing an object leaves `objects/xx/<rest>.lock`; the write retried on
    another node makes the same object (the same bytes, so the same name) and must not fail."""
    rehearsal = tmp_path / "rehearsal"
    shutil.copytree(repos.root / "demo.git", rehearsal / "demo.git")
    rehearsed = Repos(rehearsal)
    before = {p.relative_to(rehearsal / "demo.git") for p in (rehearsal / "demo.git/objects").rglob("*")}
    rehearsed.get("demo")[1].submit(_put("notes/x.md"))
    made = {p.relative_to(rehearsal / "demo.git") for p in (rehearsal / "demo.git/objects").rglob("*")}
    rehearsed.close()
    new_objects = [p for p in made - before if len(p.parts) == 3]  # objects/xx/<rest>
    assert len(new_objects) >= 4  # the blob, two trees, the commit
    repo_dir = repos.root / "demo.git"
    for rel in new_objects:
        (repo_dir / rel).parent.mkdir(exist_ok=True)
        (repo_dir / rel).with_name(rel.name + ".lock").write_bytes(b"half an object")
    repo, writer = repos.get("demo")

    writer.submit(_put("notes/x.md"))

    assert repo.view(repo.head()).read("notes/x.md") == b"notes/x.md\n"
    git_fsck(repo_dir)
