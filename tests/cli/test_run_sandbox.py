"""`kbserver run` as a sandbox host runs it: a subprocess against a real server over HTTP only (no data
folder). The command reads the mounted KBs, cannot change them, sees its run; the run ends with it,
its status passes through, and SIGTERM reaches it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.core.model import WriteRequest
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN
from kbserver.services.writing import writes
from tests.helpers import REPO_ROOT, make_agent
from tests.mcp.conftest import _Uvicorn

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
"""As root every file is writable: the command runs as nobody, as an agent in a sandbox would."""


@pytest.fixture
def url(settings: Settings, services: Services) -> Iterator[str]:
    server = _Uvicorn(settings, services).start()
    yield server.url
    server.stop()


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder everyone may enter (the command may run as nobody), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="kbserver-run-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def token_of(services: Services, agent: str) -> str:
    _, secret = agents.rotate(services, ADMIN, agent)
    return secret


def host_env(url: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBSERVER_", "CLAUDE_CODE_"))}
    return {**env, "KBSERVER_URL": url, "KBSERVER_TOKEN": token, "PYTHONPATH": str(REPO_ROOT)}


def kbserver_run(
    work: Path, env: dict[str, str], *command: str, options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kbserver.cli",
            "run",
            "--mount-root",
            str(work / "ctx"),
            *options,
            "--",
            *command,
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=300,
    )


SCRIPT = r"""
ctx="$KBSERVER_CONTEXT_DIR/notes"
head -1 "$ctx/README.md"
echo "run=$KBSERVER_RUN"
echo "url=$KBSERVER_URL"
echo "memory=${CLAUDE_CODE_DISABLE_AUTO_MEMORY:-on}"
if echo changed >> "$ctx/README.md" 2>/dev/null; then echo edit=allowed; else echo edit=refused; fi
if touch "$ctx/new.md" 2>/dev/null; then echo create=allowed; else echo create=refused; fi
rm -f "$ctx/README.md" 2>/dev/null
if [ -e "$ctx/README.md" ]; then echo delete=refused; else echo delete=allowed; fi
cat .mcp.json
exit 7
"""


def _lines(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith(" "))


def test_the_command_reads_the_mount_cannot_change_it_and_sees_its_run(
    work: Path, url: str, services: Services, kb: str, client: TestClient
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    token = token_of(services, "bob")
    head = services.repos.repo(kb).head()
    done = kbserver_run(work, host_env(url, token), *NOBODY, "sh", "-c", SCRIPT)
    assert done.returncode == 7, done.stdout + done.stderr  # the command's status
    assert "Traceback" not in done.stderr
    readme = (services.repos.repo(kb).view(head).read("README.md") or b"").decode()
    assert done.stdout.splitlines()[0] == readme.splitlines()[0]
    seen = _lines(done.stdout)
    run = seen["run"]
    assert run.startswith("run_") and seen["url"] == url
    assert (seen["edit"], seen["create"], seen["delete"]) == ("refused", "refused", "refused")
    assert seen["memory"] == "1"  # bob can write the KB: Claude Code's own auto memory is off
    config = json.loads(done.stdout[done.stdout.index("{") :])
    server = config["mcpServers"]["kbserver"]
    assert server == {
        "type": "http",
        "url": f"{url}/mcp",
        "headers": {"Authorization": "Bearer ${KBSERVER_TOKEN}", "Kb-Run": run},
    }
    mounted = work / "ctx" / kb
    assert (mounted / "README.md").read_text() == readme  # unchanged by the command
    source = json.loads((work / "ctx" / f".{kb}.kbserver-mount.json").read_text())
    assert source == {"url": url, "slug": kb, "version": head, "run": run}
    assert not (work / ".mcp.json").exists() and not (work / "ctx" / ".mcp-servers.json").exists()
    bob = {"Authorization": f"Bearer {token}"}
    ended = client.get(f"/api/v1/runs/{run}/kbs/{kb}/files", headers=bob)
    assert ended.status_code == 404 and "was ended" in ended.json()["error"]["message"]


def test_a_reader_keeps_its_auto_memory_and_a_second_run_updates_the_copy(
    work: Path, url: str, services: Services, kb: str
) -> None:
    make_agent(services, "reader", {kb: "read"})
    env = host_env(url, token_of(services, "reader"))
    first = kbserver_run(work, env, "sh", "-c", 'echo "memory=${CLAUDE_CODE_DISABLE_AUTO_MEMORY:-on}"')
    assert first.returncode == 0 and _lines(first.stdout)["memory"] == "on", first.stderr
    readme = work / "ctx" / kb / "README.md"
    kept = readme.stat()
    later = {"path": "later.md", "mode": "create", "content": "later\n"}
    writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": [later]}))
    second = kbserver_run(work, env, "cat", "ctx/" + kb + "/later.md")
    assert second.returncode == 0 and second.stdout == "later\n", second.stderr
    assert (readme.stat().st_ino, readme.stat().st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)


def test_status_and_errors_pass_through_and_the_run_always_ends(
    work: Path, url: str, services: Services, kb: str, client: TestClient
) -> None:
    make_agent(services, "bob", {kb: "read_write"})
    token = token_of(services, "bob")
    env = host_env(url, token)
    assert kbserver_run(work, env, "sh", "-c", "exit 3").returncode == 3
    assert kbserver_run(work, env, "sh", "-c", "kill -KILL $$").returncode == 128 + 9
    missing = kbserver_run(work, env, "no-such-command-here")
    assert missing.returncode == 1 and missing.stderr.strip().splitlines()[-1].startswith(
        "error: not_found: "
    )
    found = re.search(r"\brun (run_[0-9a-f]+)", missing.stderr)
    assert found is not None, missing.stderr
    run = found.group(1)
    r = client.get(f"/api/v1/runs/{run}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 404 and "was ended" in r.json()["error"]["message"]  # ended all the same
    for bad_env, options, code in (
        ({**env, "KBSERVER_TOKEN": ""}, (), "invalid_request"),
        ({**env, "KBSERVER_TOKEN": "kbs_wrong"}, (), "unauthorized"),
        ({**env, "KBSERVER_URL": ""}, (), "invalid_request"),
        (env, ("--kb", "nope"), "not_found"),
    ):
        done = kbserver_run(work, bad_env, "true", options=options)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith(f"error: {code}: "), done.stderr
        assert "Traceback" not in done.stderr
    no_command = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", "run"], capture_output=True, text=True, env=env, timeout=60
    )
    assert no_command.returncode == 1 and no_command.stderr.startswith("error: invalid_request: ")


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGTERM, "TERM"), (signal.SIGINT, "INT")])
def test_a_signal_ends_the_command_and_the_run(
    work: Path, url: str, services: Services, kb: str, client: TestClient, signum: int, name: str
) -> None:
    """SIGTERM (a sandbox stopped) and SIGINT (no terminal here, so nobody else sent it) reach the
    command; the run is ended and the command's status is kbserver run's."""
    make_agent(services, "bob", {kb: "read_write"})
    token = token_of(services, "bob")
    script = f'echo "$KBSERVER_RUN" > started; trap "echo term > stopped; exit {128 + signum}" {name}; '
    script += "while :; do sleep 0.1; done"
    host = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kbserver.cli",
            "run",
            "--mount-root",
            str(work / "ctx"),
            "--",
            "sh",
            "-c",
            script,
        ],
        cwd=work,
        env=host_env(url, token),
        stdin=subprocess.DEVNULL,  # not a terminal, whatever runs the tests
        preexec_fn=_default_signals,  # a test run in the background has SIGINT ignored: not here
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (work / "started").exists() or not (work / "started").read_text().strip():
            assert host.poll() is None, host.stderr.read() if host.stderr else ""
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        host.send_signal(signum)
        status = host.wait(timeout=120)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(timeout=30)
    assert status == 128 + signum
    assert (work / "stopped").read_text().strip() == "term"  # the command got the signal
    run = (work / "started").read_text().strip()
    r = client.get(f"/api/v1/runs/{run}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 404 and "was ended" in r.json()["error"]["message"]
