"""Helpers shared by the tests: fsck, state snapshots, agents, a live server subprocess."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from kbserver.core.model import Create, WriteRequest
from kbserver.core.paths import case_twins
from kbserver.dialects.memory import memory_add
from kbserver.dialects.session import DialectCall
from kbserver.services import Services
from kbserver.services.access import agents
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import writes

ADMIN_TOKEN = "test-admin-token"
REPO_ROOT = Path(__file__).resolve().parent.parent


def python_probe(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`code` run by a fresh interpreter of this checkout (what a command imports shows there)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


def git_fsck(repo: Path) -> None:
    """C git's full, strict fsck must pass (dangling objects are allowed)."""
    assert shutil.which("git"), "C git is needed by the tests"
    proc = subprocess.run(
        ["git", "fsck", "--full", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def state(services: Services, slug: str) -> tuple[str | None, dict[str, str]]:
    """(head, {path: blob id}): what must stay equal when a call is rejected."""
    repo = services.repos.repo(slug)
    head = repo.head()
    return head, {p: b.decode() for p, b in repo.view(head).walk()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_agent(services: Services, name: str, links: dict[str, str], **kw: object) -> dict[str, str]:
    """Create an agent with links; returns its auth headers."""
    _, token = agents.create(services, ADMIN, name, **kw)  # type: ignore[arg-type]
    for slug, permission in links.items():
        agents.link(services, ADMIN, name, slug, permission)
    return {"Authorization": f"Bearer {token}"}


def pending_proposal(services: Services, kb: str, asker: str = "asker") -> str:
    """The id of a pending proposal (idea.md) of a new agent `asker` who must ask to write to `kb`."""
    make_agent(services, asker, {kb: "read_write_ask"})
    caller = caller_for(services, asker)
    run = runs.start(services, caller, interactive=True)
    req = WriteRequest(files=[Create(path="idea.md", mode="create", content="an idea\n")], run_id=run.id)
    out = writes.submit(services, caller, kb, req)
    assert isinstance(out, ProposalAccepted)
    return out.proposal.id


def memory_caller(services: Services, kb: str, contents: list[str]) -> DialectCall:
    """alice, a memory-tools agent on `kb`, who added `contents`; all searchable once this returns."""
    make_agent(services, "alice", {kb: "read_write"}, tools=["memory"])
    call = DialectCall(services, caller_for(services, "alice"))
    for content in contents:
        memory_add(call, content)
    head = services.repos.repo(kb).head()
    assert head is not None and services.progress.wait_blocking(kb, head, 120)
    return call


def wait_healthy(
    proc: subprocess.Popen[bytes], url: str, name: str, log: Callable[[], str], timeout: float = 60
) -> None:
    """Poll `url`/healthz until it answers 200; raise with `log()` if `proc` exits or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {log()}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not become healthy within {timeout:g} s: {log()}")


def stop_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM and wait up to 30 s, then SIGKILL: a process that will not stop does not hang a test."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


class LiveServer:
    """`kbserver serve` in a subprocess on a free loopback port.

    Its output goes to a file beside the data folder, never to a pipe: nobody drains a pipe while
    the tests run, and a server whose log fills the pipe's 64 KiB blocks in its next log line.
    """

    def __init__(self, data: Path, env: dict[str, str] | None = None) -> None:
        self.data = data
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"server-{self.port}.log"

    def start(self) -> LiveServer:
        self.data.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kbserver.cli",
                    "serve",
                    "--data",
                    str(self.data),
                    "--port",
                    str(self.port),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_healthy(self.proc, self.url, "server", lambda: self.log.read_text(errors="replace"))
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        stop_process(self.proc)


class DictTree:
    """A tree held in a dict of path -> bytes; folders are implied by the paths under them."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def read(self, path: str) -> bytes | None:
        return self.files.get(path)

    def is_dir(self, path: str) -> bool:
        return any(p.startswith(path + "/") for p in self.files)

    def case_twins(self, folder: str, name: str) -> list[str]:
        base = folder + "/" if folder else ""
        names = sorted({p[len(base) :].split("/", 1)[0] for p in self.files if p.startswith(base)})
        return case_twins(name, names)
