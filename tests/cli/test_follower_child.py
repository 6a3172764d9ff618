"""`kbserver serve` follows main in a supervised child process by default: the serving process never
indexes, a child that dies is restarted, the child ends with the server, writes are searchable and
waited for exactly; `KBSERVER_FOLLOWER=embedded` keeps following in the server's own threads."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ENV = {"KBSERVER_SAMPLE": "false", "KBSERVER_EMBEDDER": "none"}

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _followers(pid: int) -> list[int]:
    """The children of `pid` running `kbserver.cli worker`."""
    out = []
    for child in _children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kbserver.cli" in argv and b"worker" in argv:
            out.append(child)
    return out


def _leader(data: Path) -> int | None:
    """The process holding the data folder's follower.lock (only the leader follows), from /proc/locks."""
    try:
        inode = (data / "follower.lock").stat().st_ino
    except FileNotFoundError:  # not made yet: nobody tried to lead
        return None
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and fields[-3].rsplit(":", 1)[-1] == str(inode):
            return int(fields[-4])
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _until(check: Callable[[], bool], seconds: float = 90) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def _one_follower(server: LiveServer) -> int:
    assert server.proc is not None
    pid = server.proc.pid
    assert _until(lambda: len(_followers(pid)) == 1), _children(pid)
    (child,) = _followers(pid)
    return child


def _write_and_find(c: httpx.Client, kb: str, path: str, word: str) -> None:
    r = c.post(f"/kbs/{kb}/write", json={"files": [{"path": path, "mode": "create", "content": word}]})
    assert r.status_code == 200, r.text
    w = c.get(f"/kbs/{kb}/index", params={"wait_for": r.json()["version"], "timeout": 60})
    assert w.status_code == 200 and w.json()["covered"] is True, w.text
    assert [h["path"] for h in c.get(f"/kbs/{kb}/search", params={"q": word}).json()["hits"]] == [path]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path / "data", env=ENV).start()
    yield live
    live.stop()


def test_the_server_follows_in_a_child_and_never_indexes_itself(server: LiveServer) -> None:
    assert server.proc is not None
    child = _one_follower(server)
    with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as c:
        assert c.post("/kbs", json={"slug": "birds"}).status_code == 201
        _write_and_find(c, "birds", "k.md", "kestrel")
    assert _leader(server.data) == child  # the child follows; the server only stands by


def test_a_child_that_dies_is_restarted_and_writes_stay_searchable(server: LiveServer) -> None:
    assert server.proc is not None
    with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as c:
        assert c.post("/kbs", json={"slug": "birds"}).status_code == 201
        _write_and_find(c, "birds", "k.md", "kestrel")
        first = _one_follower(server)
        os.kill(first, signal.SIGKILL)
        assert _until(lambda: not _alive(first))
        r = c.post(
            "/kbs/birds/write", json={"files": [{"path": "o.md", "mode": "create", "content": "osprey"}]}
        )
        assert r.status_code == 200  # the server goes on serving while no child follows
        second = _one_follower(server)
        assert second != first
        assert _until(lambda: _leader(server.data) == second)
        w = c.get("/kbs/birds/index", params={"wait_for": r.json()["version"], "timeout": 60})
        assert w.json()["covered"] is True, w.text  # the new child caught up what the dead one missed
        _write_and_find(c, "birds", "p.md", "petrel")
    log = server.log.read_text(errors="replace")
    assert f"follower process {first} exited" in log  # one log: the server says what happened


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_child_ends_with_the_server(tmp_path: Path, how: str) -> None:
    server = LiveServer(tmp_path / "data", env=ENV).start()
    try:
        child = _one_follower(server)
        if how == "stop":
            server.stop()  # SIGTERM: the server stops its child before it exits
            assert _until(
                lambda: f"follower process {child} stopped" in server.log.read_text(errors="replace")
            )
        else:
            server.kill()  # SIGKILL: the server cannot stop it, the child notices on its own
        assert _until(lambda: not _alive(child)), f"follower process {child} outlived the server"
    finally:
        server.stop()


def test_embedded_keeps_following_in_the_servers_own_threads(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data", env={**ENV, "KBSERVER_FOLLOWER": "embedded"}).start()
    try:
        assert server.proc is not None
        with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as c:
            assert c.post("/kbs", json={"slug": "birds"}).status_code == 201
            _write_and_find(c, "birds", "k.md", "kestrel")
        assert _followers(server.proc.pid) == []
        assert _leader(server.data) == server.proc.pid
    finally:
        server.stop()


def test_after_a_kill_the_child_goes_and_a_restarted_server_follows_in_its_own(tmp_path: Path) -> None:
    first = LiveServer(tmp_path / "data", env=ENV).start()
    try:
        old = _one_follower(first)
        assert _until(lambda: _leader(first.data) == old)
        first.kill()  # SIGKILL: no shutdown of the server; the child must notice and end by itself
        assert _until(lambda: not _alive(old)), f"follower process {old} outlived the server"
    finally:
        first.stop()
    second = LiveServer(tmp_path / "data", env=ENV).start()
    try:
        child = _one_follower(second)
        assert _until(lambda: _leader(second.data) == child)  # the old child left follower.lock
        with httpx.Client(base_url=second.url + "/api/v1", headers=AUTH, timeout=60) as c:
            assert c.post("/kbs", json={"slug": "birds"}).status_code == 201
            _write_and_find(c, "birds", "k.md", "kestrel")
    finally:
        second.stop()
