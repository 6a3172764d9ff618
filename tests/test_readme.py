"""The README's commands are the ones that work: install line, walkthrough, client snippets, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, REPO_ROOT, LiveServer, free_port

README = (REPO_ROOT / "README.md").read_text()
CONTRACT_INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/kbserver serve"


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else None]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def test_the_install_line_is_the_contracts() -> None:
    (line,) = _blocks(_section("Install and run"), "sh")
    assert line.strip() == CONTRACT_INSTALL  # a venv: works where the system Python refuses pip (PEP 668)
    assert "pip install -e . &&" not in README.replace(".venv/bin/pip install -e . &&", "")


def test_desktop_snippets_use_absolute_paths() -> None:
    mcp = _section("MCP")
    snippets = [json.loads(block) for block in _blocks(mcp, "json")]
    commands = [
        server for snippet in snippets for server in snippet["mcpServers"].values() if "command" in server
    ]
    assert len(commands) == 2
    for server in commands:
        assert server["command"].startswith("/") and server["command"].endswith("/.venv/bin/kbserver")
        data = server["args"][server["args"].index("--data") + 1]
        assert data.startswith("/"), server
    for line in _blocks(mcp, "sh")[0].splitlines():
        if "-- " in line:  # a stdio command line: absolute too
            assert line.split("-- ", 1)[1].startswith("/"), line


def test_exit_codes_are_documented_as_they_are() -> None:
    table = _section("Command line")
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert documented == {0, 1, 2, 130, 143}
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    run = [sys.executable, "-m", "kbserver.cli"]
    assert subprocess.run([*run, "--help"], capture_output=True, env=env, timeout=60).returncode == 0
    assert subprocess.run([*run, "bogus"], capture_output=True, env=env, timeout=60).returncode == 1


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The curl walkthrough, run by bash as it stands (only the port differs), against `serve`
    started the README's way in the same folder, with a generated admin token."""
    (script,) = _blocks(_section("A first session with curl"), "sh")
    port = free_port()
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    kbserver = work / ".venv" / "bin" / "kbserver"  # this checkout, as `pip install -e .` would give
    kbserver.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kbserver.cli "$@"\n')
    kbserver.chmod(0o755)
    (work / ".venv" / "bin" / "activate").write_text(f'export PATH="{kbserver.parent}:$PATH"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBSERVER_", "GIT_"))}
    env.update({"PYTHONPATH": str(REPO_ROOT), "GIT_TERMINAL_PROMPT": "0", "HOME": str(tmp_path)})
    server = subprocess.Popen(
        [str(kbserver), "serve", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        for _ in range(10):  # the sample import, then the URL and token once it listens
            if server.stdout.readline().startswith("admin token: "):
                break
        deadline = time.monotonic() + 60
        while httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("8765", str(port))],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert '"slug":"sample"' in out and '"path":"README.md"' in out
    assert '"versions":[' in out and '"hits":[' in out
    assert re.search(r'^kbserver_commits_total\{kb="sample"\} 3\.0$', out, re.M), out
    cloned = (work / "sample" / "log" / "2026-11.md").read_text()
    assert "Deploy v1.9" in cloned  # bob's write, read back through git clone


@pytest.mark.slow
def test_the_python_mcp_snippet_runs_as_written(tmp_path: Path) -> None:
    """The README's Python client (SDK default mode, bearer header) against `serve` with the sample
    KB, run as pasted (only the port differs)."""
    (snippet,) = _blocks(_section("MCP"), "python")
    server = LiveServer(tmp_path / "data").start()
    try:
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        api = f"{server.url}/api/v1"
        token = httpx.post(f"{api}/agents", json={"name": "bob"}, headers=admin, timeout=30).json()["token"]
        link = {"kb": "sample", "permission": "read_write"}
        linked = httpx.post(f"{api}/agents/bob/links", json=link, headers=admin, timeout=30)
        assert linked.status_code in (200, 201), linked.text
        script = tmp_path / "client.py"
        script.write_text(snippet.replace("8765", str(server.port)))
        proc = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "BOB_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        first, version = proc.stdout.splitlines()
        assert first.startswith("# ") and re.fullmatch(r"version [0-9a-f]{40}", version), proc.stdout
        runs = httpx.get(f"{api}/kbs/sample/versions", params={"limit": 1}, headers=admin, timeout=30).json()
        assert runs["versions"][0]["run"].startswith("run_")  # the write carries the run
    finally:
        server.stop()
