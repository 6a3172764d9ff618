"""A commit fsyncs what it wrote, as git's core.fsync does: its objects, their folders, the ref and
its folder; never the whole file system (syncfs) and nothing of anyone else's."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kbserver.store import CommitPlan, Repos, durable
from kbserver.store import writer as writer_module
from tests.helpers import git_fsck

AUTHOR = "agent:test <test@kbserver.invalid>"


def test_a_commit_fsyncs_its_objects_their_folders_and_the_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = Repos(tmp_path / "kbs")
    repos.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    other = tmp_path / "someone-else.bin"
    other.write_bytes(b"x" * 4096)  # dirty data of another program on the same file system
    synced: list[str] = []
    locked_then: list[bool] = []  # at each fsync of refs/heads: whether main.lock was still there
    real = durable.fsync_path

    def spy(path: str) -> None:
        synced.append(os.path.realpath(path))
        if os.path.basename(path) == "heads":
            locked_then.append(os.path.exists(os.path.join(path, "main.lock")))
        real(path)

    monkeypatch.setattr(durable, "fsync_path", spy)
    monkeypatch.setattr(writer_module, "fsync_path", durable.fsync_path)  # main's folder once it moved
    repo, writer = repos.get("demo")
    version, _, _ = writer.submit(lambda _tip: CommitPlan({"a/b.md": b"bee\n"}, "write", AUTHOR))
    root = os.path.realpath(repos.path("demo"))
    objects = os.path.join(root, "objects")
    commit = repo.git[version.encode()]
    tree = repo.git[commit.tree]  # type: ignore[attr-defined]
    blob = repo.view(version).read("a/b.md")
    assert blob == b"bee\n"
    for sha in (version, commit.tree.decode(), tree[b"a"][1].decode()):  # type: ignore[attr-defined]
        path = os.path.join(objects, sha[:2], sha[2:])
        assert path in synced and os.path.dirname(path) in synced, sha
    assert objects in synced  # an objects/xx folder may be new: its name is in `objects`
    heads = os.path.join(root, "refs", "heads")
    (ref_file,) = [p for p in synced if re.fullmatch(r"main\.f\d+\.lock", os.path.basename(p))]
    assert os.path.dirname(ref_file) == heads and heads in synced  # the new ref's file, then its folder
    assert os.path.join(heads, "main") not in synced  # flushed as its own file already: once is enough
    # Its folder once, after the rename: main.lock's own name never needs to be durable (it is
    # renamed onto main, and only main's name in the folder matters).
    assert synced.count(heads) == 1 and locked_then == [False]
    assert synced.index(heads) > synced.index(ref_file)
    assert all(p.startswith(root) for p in synced)  # nothing outside the repository
    assert str(other) not in synced
    git_fsck(repos.path("demo"))
