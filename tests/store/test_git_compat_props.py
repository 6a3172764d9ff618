"""Store reads against C git on random histories (hypothesis, bounded): the files of every version
(`git ls-tree -r`), the history of every path (`git log --first-parent -- PATH`) and the changes of
every version (`git diff-tree -r`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbserver.core.errors import KBError
from kbserver.store import CommitPlan, KBRepo, Repos

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs C git")

AUTHOR = "agent:test <test@kbserver.invalid>"
# `n` is a file in some versions and a folder (`n/x.md`) in others; `b` and `b-c` sort differently
# as tree entries than as paths; one name is Chinese.
PATHS = ["a.md", "b/c.md", "b/d/e.md", "b-c.md", "n", "n/x.md", "日志/11.md"]
CONTENT = st.sampled_from([b"", b"one\n", b"two\n", b"one\ntwo\n", "咖啡\n".encode()])
STEP = st.dictionaries(st.sampled_from(PATHS), st.one_of(st.none(), CONTENT), min_size=1, max_size=3)


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def _ls_tree(repo: Path, version: str) -> dict[str, str]:
    out = {}
    for entry in _git(repo, "ls-tree", "-r", "-z", version).split(b"\0"):
        if entry:
            meta, path = entry.split(b"\t", 1)
            out[path.decode()] = meta.split()[2].decode()
    return out


def _diff_tree(repo: Path, old: str | None, new: str) -> list[tuple[str, str, str | None, str | None]]:
    args = (
        ["diff-tree", "-r", "-z", "--no-renames", old, new]
        if old
        else ["diff-tree", "-r", "-z", "--root", new]
    )
    fields = _git(repo, *[a for a in args if a]).split(b"\0")
    if not old:
        fields = fields[1:]  # --root prints the commit id first
    kinds = {"A": "added", "M": "modified", "D": "deleted"}
    out = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta:
            continue
        _, _, old_sha, new_sha, status = meta.decode().lstrip(":").split()
        zero = "0" * 40
        out.append(
            (
                path.decode(),
                kinds[status],
                None if old_sha == zero else old_sha,
                None if new_sha == zero else new_sha,
            )
        )
    return sorted(out)


def _build(root: Path, steps: list[dict[str, bytes | None]]) -> tuple[Repos, list[str]]:
    repos = Repos(root, fsync=False)
    repos.create("demo", b"# Demo\n", AUTHOR, "create KB demo")
    repo, writer = repos.get("demo")
    made = [repo.head() or ""]
    for changes in steps:
        try:
            made.append(writer.submit(lambda _tip, c=changes: CommitPlan(c, "write", AUTHOR))[0])
        except KBError:
            continue  # deleting a missing file, a file over a folder: refused, nothing changed
    return repos, made


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=10), data=st.data())
def test_store_reads_equal_c_git(steps: list[dict[str, bytes | None]], data: st.DataObject) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kb-gitcompat-"))
    try:
        repos, made = _build(tmp / "kbs", steps)
        repo: KBRepo = repos.repo("demo")
        path = repos.path("demo")
        head = repo.head()
        assert head == made[-1]
        log = _git(path, "log", "--first-parent", "--format=%H", "main").decode().split()
        assert log == list(repo.first_parents(head or "")) == made[::-1]
        folders: set[str] = set()
        for version in made:
            ours = {p: blob.decode() for p, blob in repo.view(version).walk()}
            assert ours == _ls_tree(path, version)
            folders |= {p.rsplit("/", 1)[0] for p in ours if "/" in p}
            parent = repo.commit_info(version).parent
            changes = [(c.path, c.change, c.old_blob, c.new_blob) for c in repo.changes(parent, version)]
            assert changes == _diff_tree(path, parent, version)
            for _ in range(2):  # the first computes, the second comes from the cache: both as C git says
                cached = repo.version_changes(version)
                assert [(c.path, c.change, c.old_blob, c.new_blob) for c in cached] == changes
        # and across several versions (the follower diffs from what a sink covered to the head)
        old, new = data.draw(st.sampled_from(made)), data.draw(st.sampled_from(made))
        changes = [(c.path, c.change, c.old_blob, c.new_blob) for c in repo.changes(old, new)]
        assert changes == _diff_tree(path, old, new)
        for p in PATHS:
            if p in folders or any(f.startswith(p + "/") for f in folders):
                continue  # `git log -- DIR` follows a folder; the store's history is of one file
            theirs = _git(path, "log", "--first-parent", "--format=%H", "main", "--", p).decode().split()
            assert list(repo.path_history(head or "", p)) == theirs, p
            # A bounded look: the versions among the `within` newest that changed p, and where it
            # stopped; looking on from there finds the rest.
            within = data.draw(st.integers(0, len(made)))
            first, stop = repo.path_history_within(head or "", p, within)
            assert stop == (made[::-1][within] if within < len(made) else None), (p, within)
            rest = repo.path_history_within(stop, p, len(made))[0] if stop else []
            assert first + rest == theirs, (p, within)
            assert all(v in made[::-1][:within] for v in first)
        # on main, asked in any order of a cold cache: every version, and no side commit on one of them
        sides = [
            _git(path, "commit-tree", "-p", v, "-m", "side", repo.commit_info(v).version + "^{tree}")
            .decode()
            .strip()
            for v in made[::3]
        ]
        cold = KBRepo(str(path))
        cold.main_step = data.draw(st.integers(1, 4))  # so that the lazy walk below the known range runs
        for v in data.draw(st.permutations(made + sides)):
            assert cold.on_main(v) == (v in made), v
        cold.close()
        repos.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
