"""The README's commands are the ones that work: install line, walkthrough, client snippets, exit codes.

And the README stays a user's document: short, no issue numbers or lab notes, every page it links to
exists (architecture, performance and decisions live in docs/).
"""

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


def test_the_test_command_is_the_contracts() -> None:
    (line,) = _blocks(_section("Run the tests"), "sh")
    assert line.strip() == "scripts/test"
    assert (REPO_ROOT / "scripts" / "test").stat().st_mode & 0o111
    ci = (REPO_ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "exec scripts/test"  # .ci/run calls exactly it


def test_the_readme_is_a_users_document() -> None:
    assert len(README.splitlines()) <= 440, "README.md is for users: put details in docs/reference.md"
    for lab_note in (r"\bissue \d+", r"\bround\b", r"\bp95\b", r"\bload \d"):
        assert not re.search(lab_note, README, re.I), lab_note
    titles = re.findall(r"^## (.+)$", README, re.M)
    assert len(titles) == len(set(titles)), titles  # no section twice
    needed = [
        "Install and run",
        "Run the tests",
        "A first session with curl",
        "MCP",
        "Memory tool sets",
        "Review in the browser",
        "Command line",
        "Settings",
        "Docker",
        "Running several nodes",
    ]
    assert [title for title in needed if title not in titles] == []
    for link in re.findall(r"\]\(((?:docs/|CHANGELOG)[^)#]*)", README):
        assert (REPO_ROOT / link).is_file(), link
    for doc in ("architecture", "performance", "decisions"):
        assert f"docs/{doc}.md" in README


def test_running_several_nodes_names_each_operators_step() -> None:
    """The operator's page of issue 34: migrate, the public URL, trusted proxies, TLS at HAProxy with
    its certificate path, admin commands on a cluster, and what to do when PostgreSQL is down."""
    section = " ".join(_section("Running several nodes").split())
    for needed in (
        "`kbserver migrate`",
        "`KBSERVER_PUBLIC_URL`",
        "`KBSERVER_TRUSTED_PROXIES`",
        "deploy/haproxy-tls.cfg",
        "/etc/haproxy/certs/",
        "Admin commands",
        "`KBSERVER_CONTROL_URL`",
        "When PostgreSQL is down",
        "503",
        "no restart",
    ):
        assert needed in section, needed
    assert (REPO_ROOT / "deploy" / "haproxy-tls.cfg").is_file()


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
    assert documented == {0, 1, 2, 130, 141, 143}
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    run = [sys.executable, "-m", "kbserver.cli"]
    assert subprocess.run([*run, "--help"], capture_output=True, env=env, timeout=60).returncode == 0
    assert subprocess.run([*run, "bogus"], capture_output=True, env=env, timeout=60).returncode == 1


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The curl walkthrough, run by bash as it stands (only the port differs), against `serve`
    started the README's way in the same folder, with a generated admin token; then run again, as a
    user who comes back would, with the README's way to a new token."""
    first, again = _blocks(_section("A first session with curl"), "sh")
    port = free_port()
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    kbserver = work / ".venv" / "bin" / "kbserver"  # this checkout, as `pip install -e .` would give
    kbserver.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kbserver.cli "$@"\n')
    kbserver.chmod(0o755)
    (work / ".venv" / "bin" / "activate").write_text(f'export PATH="{kbserver.parent}:$PATH"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBSERVER_", "GIT_"))}
    env.update({"PYTHONPATH": str(REPO_ROOT), "GIT_TERMINAL_PROMPT": "0", "HOME": str(tmp_path)})

    def bash(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("8765", str(port))],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

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
        proc = bash(first)
        rerun = bash("source .venv/bin/activate\nkbserver agent create bob | tail -n 1")
        token = bash(f'source .venv/bin/activate\n{again}\necho "$BOB_TOKEN"')
        kbs = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/kbs",
            headers={"Authorization": f"Bearer {token.stdout.strip()}"},
            timeout=30,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith(("{", "["))]
    listing, readme, write, found, versions = answers
    assert [kb["slug"] for kb in listing] == ["sample"] and readme["path"] == "README.md"
    assert found["version"] == write["version"]  # the search waited for bob's write
    assert found["hits"][0]["path"] == "log/2026-11.md", found
    assert versions["versions"][0]["version"] == write["version"]
    assert re.search(r'^kbserver_commits_total\{kb="sample"\} 3\.0$', proc.stdout, re.M), proc.stdout
    clone = tmp_path / "kb-sample"  # ~/kb-sample: outside the checkout
    assert "Deploy v1.9" in (clone / "log" / "2026-11.md").read_text()  # bob's write, read back by git
    assert not (work / "sample").exists()
    assert token.stdout.strip() and token.stdout.strip() not in (clone / ".git" / "config").read_text()
    assert "extraheader" not in (clone / ".git" / "config").read_text().lower()
    # Run again: `agent create bob` says so and how to get a token, and the README's line gets one.
    assert rerun.returncode == 1 and rerun.stdout == ""
    assert "error: already_exists: " in rerun.stderr and "kbserver agent token bob" in rerun.stderr
    assert token.returncode == 0 and token.stdout.strip().startswith("kbs_"), token.stderr
    assert kbs.status_code == 200 and [kb["slug"] for kb in kbs.json()] == ["sample"]


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
