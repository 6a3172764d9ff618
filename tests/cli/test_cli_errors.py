"""CLI errors: a bad setting, argument, port or data folder is one `error: CODE: MESSAGE` line."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN

_LINE = re.compile(r"^error: [a-z_]+: \S.*\n$")


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    return subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args],
        capture_output=True,
        text=True,
        env={**base, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, **(env or {})},
        timeout=timeout,
    )


def assert_one_error_line(proc: subprocess.CompletedProcess[str], code: str, *words: str) -> None:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _LINE.match(proc.stderr), repr(proc.stderr)  # exactly one line, no traceback
    assert proc.stderr.startswith(f"error: {code}: "), proc.stderr
    for word in words:
        assert word in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["--port", "99999"], {}, ["--port", "99999"]),
        (["--port", "abc"], {}, ["--port", "abc"]),
        ([], {"KBSERVER_PORT": "abc"}, ["KBSERVER_PORT", "abc"]),
        ([], {"KBSERVER_MAX_FILES": "0"}, ["KBSERVER_MAX_FILES"]),
        ([], {"KBSERVER_LOG_LEVEL": "LOUD"}, ["KBSERVER_LOG_LEVEL", "LOUD"]),
        ([], {"KBSERVER_FSYNC": "maybe"}, ["KBSERVER_FSYNC"]),
        ([], {"KBSERVER_RUN_TTL_SECONDS": "-1"}, ["KBSERVER_RUN_TTL_SECONDS"]),
        ([], {"KBSERVER_FOLLOWER_NICE": "20"}, ["KBSERVER_FOLLOWER_NICE", "19"]),
        ([], {"KBSERVER_FOLLOWER_NICE": "-5"}, ["KBSERVER_FOLLOWER_NICE", "-5"]),
        ([], {"KBSERVER_FOLLOWER_NICE": "low"}, ["KBSERVER_FOLLOWER_NICE", "low"]),
        ([], {"KBSERVER_FOLLOWER_BATCH_MS": "-1"}, ["KBSERVER_FOLLOWER_BATCH_MS"]),
        ([], {"KBSERVER_FOLLOWER_BATCH_MS": "soon"}, ["KBSERVER_FOLLOWER_BATCH_MS", "soon"]),
    ],
)
def test_a_bad_setting_is_one_line_and_creates_nothing(
    tmp_path: Path, args: list[str], env: dict[str, str], names: list[str]
) -> None:
    data = tmp_path / "data"
    proc = run("serve", "--data", str(data), *args, env=env)
    assert_one_error_line(proc, "invalid_request", *names)
    assert proc.stdout == ""
    assert not data.exists()


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run("kb", "create", "x", "--data", str(data))
    proc = run("fsck", "--data", str(data), env={"KBSERVER_LOG_LEVEL": "debug"})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["nosuch"],
        ["kb"],
        ["link", "bob"],
        ["link", "bob", "kb", "--permission", "root"],
        ["kb", "limits", "x", "--max-files", "many"],
    ],
)
def test_a_bad_argument_is_one_line(tmp_path: Path, args: list[str]) -> None:
    proc = run(*args)
    assert_one_error_line(proc, "invalid_request", "--help")


def test_serve_on_a_busy_port_fails_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run("serve", "--data", str(data), "--port", str(port), env={"KBSERVER_SAMPLE": "true"})
    assert_one_error_line(proc, "unavailable", f"127.0.0.1:{port}", "--port")
    # nothing was imported and no URL or token was printed
    assert proc.stdout == ""
    assert not data.exists()


@pytest.mark.slow
def test_serve_reports_the_address_once_it_listens(tmp_path: Path) -> None:
    """With --port 0 the printed URL has the real port, and it answers at once."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(tmp_path / "d"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**env, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, "KBSERVER_SAMPLE": "false"},
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        match = re.match(r"kbserver \S+ on (http://127\.0\.0\.1:(\d+))$", lines[0].strip())
        assert match, lines
        assert int(match.group(2)) != 0
        assert httpx.get(match.group(1) + "/healthz", timeout=30).status_code == 200  # no retry needed
        assert lines[2].strip() == f"admin token: {ADMIN_TOKEN}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_serve_exits_with_the_readme_s_codes(tmp_path: Path, signum: int, code: int) -> None:
    """README's exit codes: Ctrl-C is 130; SIGTERM (docker stop) ends the process by that signal after a
    clean shutdown, which a shell and docker report as 128 + 15 = 143."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    log = tmp_path / "stderr.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbserver.cli", "serve", "--data", str(tmp_path / "d"), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**env, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, "KBSERVER_SAMPLE": "false"},
            # As a terminal's Ctrl-C finds it: a suite started in the background (`cmd &`) inherits
            # SIGINT ignored, and then the signal uvicorn re-raises after its shutdown does nothing.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        assert proc.stdout is not None
        url = re.match(r"kbserver \S+ on (http://\S+)$", proc.stdout.readline().strip())
        assert url, log.read_text()
        assert httpx.get(url.group(1) + "/healthz", timeout=30).status_code == 200
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == code, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["fsck"],
        ["reindex"],
        ["agent", "create", "bob"],
        ["link", "bob", "kb", "--permission", "read"],
        ["kb", "limits", "kb", "--max-files", "3"],
        ["import", "kb", "."],
        ["mount", "kb", "out"],
        ["mcp", "--agent", "bob"],
        ["worker"],
        ["kb", "list"],
        ["agent", "list"],
        ["proposals", "kb"],
    ],
)
def test_commands_refuse_a_missing_data_folder(tmp_path: Path, args: list[str]) -> None:
    typo = tmp_path / "typo"
    proc = run(*args, "--data", str(typo))
    assert_one_error_line(proc, "not_found", str(typo), "--data")
    assert not typo.exists()


def test_serve_and_kb_create_make_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    proc = run("kb", "create", "team", "--data", str(data))
    assert proc.returncode == 0, proc.stderr
    assert (data / "kbs" / "team.git").is_dir()


def test_a_data_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    proc = run("kb", "create", "team", "--data", str(file))
    assert_one_error_line(proc, "invalid_request", "not a folder")
    assert file.read_text() == "x"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["mount", "team", "{tmp}/out", "--version", "deadbeef"], "invalid_request"),
        (["mount", "nokb", "{tmp}/out"], "not_found"),
        (["import", "team", "{tmp}/nofolder"], "invalid_request"),
        (["import", "Bad_slug", "{tmp}"], "invalid_request"),
        (["reindex", "nokb"], "not_found"),
    ],
)
def test_a_refused_command_with_a_progress_bar_prints_only_its_error(
    tmp_path: Path, args: list[str], code: str
) -> None:
    """stderr is a pipe here: the bar's final state is printed only when the command succeeds."""
    data = tmp_path / "data"
    assert run("kb", "create", "team", "--data", str(data)).returncode == 0
    head = subprocess.run(
        ["git", "--git-dir", str(data / "kbs" / "team.git"), "rev-parse", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    proc = run(*[a.format(tmp=tmp_path) for a in args], "--data", str(data))
    assert_one_error_line(proc, code)
    assert not (tmp_path / "out").exists()
    assert (
        subprocess.run(
            ["git", "--git-dir", str(data / "kbs" / "team.git"), "rev-parse", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        == head
    )
