"""Several `kbserver serve` nodes on one data folder, PostgreSQL as their control store, and HAProxy
in front running deploy/haproxy.cfg: for tests/cluster and bench/cluster.py.

Each node is a real process with its own cache folder (its search index), started, SIGKILLed and
restarted on the same port. The environment
every node gets is `node_env`, the one deploy/compose.yaml gives its nodes (tests/deploy checks).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers import free_port, stop_process, wait_healthy

__all__ = [
    "HAPROXY_CFG",
    "TEST_ONLY",
    "Balancer",
    "Node",
    "migrate",
    "migrate_command",
    "node_env",
    "serve_command",
]

ROOT = Path(__file__).resolve().parents[2]
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"


def serve_command(data: str, port: int, host: str = "127.0.0.1") -> list[str]:
    """The command of one node: `kbserver serve` on the shared data folder."""
    return ["kbserver", "serve", "--host", host, "--port", str(port), "--data", data]


def migrate_command(data: str) -> list[str]:
    """The one-off command that brings the control store's schema up to date before nodes start."""
    return ["kbserver", "migrate", "--data", data]


def migrate(data: Path, env: dict[str, str]) -> None:
    """`kbserver migrate` on the (empty) shared folder, as compose's `migrate` step does on its volume."""
    data.mkdir(parents=True, exist_ok=True)
    exe = [sys.executable, "-m", "kbserver.cli", *migrate_command(str(data))[1:]]
    done = subprocess.run(exe, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def writer_agent(url: str, kb: str, admin_token: str) -> dict[str, str]:
    """Create KB `kb` and an agent `w` that may write it, through the node at `url`; its auth header."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=url, timeout=60) as http:
        assert http.post("/api/v1/kbs", json={"slug": kb}, headers=admin).status_code == 201
        r = http.post("/api/v1/agents", json={"name": "w"}, headers=admin)
        assert r.status_code == 201, r.text
        auth = {"Authorization": f"Bearer {r.json()['token']}"}
        r = http.post("/api/v1/agents/w/links", json={"kb": kb, "permission": "read_write"}, headers=admin)
        assert r.status_code == 200, r.text
    return auth


def node_env(control_url: str, cache: str, admin_token: str, balancer: str) -> dict[str, str]:
    """The settings every node of a cluster runs with (deploy/compose.yaml sets the same)."""
    return {
        "KBSERVER_CONTROL_URL": control_url,  # agents, tokens, proposals... shared by every node
        "KBSERVER_CACHE_DIR": cache,  # the node's own search index, vectors and feed position
        "KBSERVER_ADMIN_TOKEN": admin_token,  # the same on every node
        "KBSERVER_ALLOWED_HOSTS": balancer,  # the Host clients reach /mcp by
        "KBSERVER_SAMPLE": "false",  # nodes starting together must not all import the sample KB
    }


# What the tests add to node_env: keyword search only, so three nodes fit in CI's 2 cores.
TEST_ONLY = {"KBSERVER_EMBEDDER": "none"}


class Node:
    """One `kbserver serve` process on a fixed port, so it can die and come back at one address."""

    def __init__(
        self,
        name: str,
        data: Path,
        folder: Path,
        env: dict[str, str],
        port: int | None = None,
        *,
        own_group: bool = False,
    ) -> None:
        """`own_group`: the node (and its follower child) in a process group of its own (`signal`)."""
        self.name = name
        self.own_group = own_group
        self.data = data
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"{name}.log"
        self.env = {**os.environ, **env, **TEST_ONLY}
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> Node:
        exe = [sys.executable, "-m", "kbserver.cli", *serve_command(str(self.data), self.port)[1:]]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                exe, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=self.own_group
            )
        return self

    def signal(self, sig: int) -> None:
        """Send `sig` to the node's whole process group (the server, its follower child, any git it
        runs): SIGSTOP freezes the node as a machine that stops being scheduled, SIGCONT thaws it."""
        assert self.own_group and self.proc is not None
        os.killpg(self.proc.pid, sig)

    def wait_healthy(self, timeout: float = 90) -> Node:
        assert self.proc is not None
        wait_healthy(self.proc, self.url, self.name, self.tail, timeout)
        return self

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no goodbye, no flush, as a machine that loses power."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.own_group and self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)  # a frozen node cannot heed SIGTERM
        stop_process(self.proc)


class Balancer:
    """HAProxy running deploy/haproxy.cfg in the foreground, its addresses from the environment."""

    def __init__(self, folder: Path, nodes: list[Node], port: int | None = None) -> None:
        exe = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not os.path.exists(exe):
            raise RuntimeError("HAProxy is not installed: apt-get install -y haproxy (scripts/test does)")
        self.exe = exe
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.host = f"127.0.0.1:{self.port}"
        self.log = folder / "haproxy.log"
        self.env = {**os.environ, "KB_BIND": self.host}
        for n, node in enumerate(nodes, 1):
            self.env[f"KB_NODE{n}"] = f"127.0.0.1:{node.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Balancer:
        """Start HAProxy, then wait until a request through it reaches a node."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.exe, "-db", "-f", str(HAPROXY_CFG)], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_healthy(self.proc, self.url, "haproxy", self._log_text)
        return self

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc)
