"""scripts/check_commits.py: subjects since the check was added read `layer: what` under 72 characters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_commits.py"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _commit(repo: Path, subject: str, name: str = "f.txt") -> None:
    (repo / name).write_text(subject)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", subject)


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(repo)], capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "an old subject that is far longer than seventy-two characters, from before the check")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "check_commits.py").write_text(SCRIPT.read_text())
    _commit(tmp_path, "scripts: check commit subjects")
    return tmp_path


def test_history_before_the_check_is_left_alone(repo: Path) -> None:
    _commit(repo, "store: one fsync fewer per commit")
    result = _check(repo)
    assert result.returncode == 0, result.stderr


def test_a_long_subject_after_the_check_fails(repo: Path) -> None:
    _commit(repo, "store: " + "x" * 70)
    result = _check(repo)
    assert result.returncode == 1
    assert "77 characters" in result.stderr


def test_a_subject_without_a_layer_fails(repo: Path) -> None:
    _commit(repo, "Fixed the thing")
    result = _check(repo)
    assert result.returncode == 1
    assert "layer: what" in result.stderr
