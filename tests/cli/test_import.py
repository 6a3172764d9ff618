"""`kbserver import`: only changed files make a version, nothing changed makes none, --delete mirrors."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli.test_cli import kbserver
from tests.helpers import git_fsck


def _log(repo: Path) -> list[str]:
    out = subprocess.run(["git", "log", "--format=%H %s", "main"], cwd=repo, capture_output=True, text=True)
    return out.stdout.strip().splitlines()


def _changed(repo: Path, version: str) -> list[str]:
    out = subprocess.run(
        ["git", "show", "--name-status", "--format=", version], cwd=repo, capture_output=True, text=True
    )
    return sorted(out.stdout.strip().splitlines())


def _files(repo: Path) -> dict[str, str]:
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "main"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    return {
        n: subprocess.run(["git", "show", f"main:{n}"], cwd=repo, capture_output=True, text=True).stdout
        for n in names
    }


def test_reimport_unchanged_makes_no_version_and_import_never_deletes(tmp_path: Path) -> None:
    data, src = tmp_path / "data", tmp_path / "src"
    data.mkdir()
    (src / "notes").mkdir(parents=True)
    (src / "README.md").write_text("# Mine\n")
    for name in ("a", "b", "c"):
        (src / "notes" / f"{name}.md").write_text(f"{name}\n")
    kbserver(data, "import", "imp", str(src))
    repo = data / "kbs" / "imp.git"
    before = _log(repo)
    assert len(before) == 2

    again = kbserver(data, "import", "imp", str(src))
    assert "nothing changed" in again.stdout and "no version" in again.stdout
    assert _log(repo) == before  # no empty version

    (src / "notes" / "a.md").write_text("a, edited\n")
    (src / "notes" / "d.md").write_text("d\n")
    (src / "notes" / "b.md").unlink()
    out = kbserver(data, "import", "imp", str(src))
    assert "imported 2 files" in out.stdout and "(2 unchanged)" in out.stdout
    log = _log(repo)
    assert len(log) == 3
    assert _changed(repo, log[0].split()[0]) == ["A\tnotes/d.md", "M\tnotes/a.md"]
    assert "notes/b.md" in _files(repo)  # an import never deletes
    git_fsck(repo)


def test_delete_mirrors_the_folder_in_one_version(tmp_path: Path) -> None:
    data, src = tmp_path / "data", tmp_path / "src"
    data.mkdir()
    (src / "notes").mkdir(parents=True)
    (src / "README.md").write_text("# Mine\n")
    for name in ("a", "b", "c"):
        (src / "notes" / f"{name}.md").write_text(f"{name}\n")
    kbserver(data, "import", "imp", str(src))
    repo = data / "kbs" / "imp.git"
    (src / "notes" / "b.md").unlink()
    (src / "notes" / "c.md").unlink()
    (src / "notes" / "e.md").write_text("e\n")
    (src / "notes" / "b.md.bin").write_bytes(b"\xff\xfe\x00")  # skipped, never a reason to delete
    out = kbserver(data, "import", "imp", str(src), "--delete")
    assert "imported 1 files, deleted 2" in out.stdout and "b.md.bin" in out.stderr
    log = _log(repo)
    assert len(log) == 3  # the mirror is one version
    assert _changed(repo, log[0].split()[0]) == ["A\tnotes/e.md", "D\tnotes/b.md", "D\tnotes/c.md"]
    assert _files(repo) == {"README.md": "# Mine\n", "notes/a.md": "a\n", "notes/e.md": "e\n"}
    again = kbserver(data, "import", "imp", str(src), "--delete")
    assert "nothing changed" in again.stdout and _log(repo) == log
    git_fsck(repo)
