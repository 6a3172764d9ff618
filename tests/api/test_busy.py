"""A write to a KB whose writer lock another process holds past `write_wait_seconds`: 503 `busy`
with `Retry-After`, and nothing changed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import ADMIN_TOKEN, LiveServer, git_fsck
from tests.store.test_writer_bounds import hold_writer_lock, let_go

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path / "data", env={"KBSERVER_WRITE_WAIT_SECONDS": "0.5"}).start()
    yield live
    live.stop()


def test_a_write_to_a_kb_held_elsewhere_is_busy_and_changes_nothing(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=60) as http:
        assert http.post("/kbs", json={"slug": "notes"}).status_code == 201
        before = http.get("/kbs/notes/versions").json()["versions"]
        repo = server.data / "kbs" / "notes.git"
        holder = hold_writer_lock(repo)
        try:
            write = {"files": [{"path": "a.md", "mode": "create", "content": "albatross\n"}]}
            r = http.post("/kbs/notes/write", json=write)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "busy" and int(r.headers["Retry-After"]) >= 1
            assert http.get("/kbs/notes/versions").json()["versions"] == before
            assert http.get("/kbs/notes/files/a.md").status_code == 404
        finally:
            let_go(holder)
        assert http.post("/kbs/notes/write", json=write).status_code == 200  # free again: it writes
    git_fsck(repo)


HOLD_DB = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
"""


def test_a_control_database_locked_by_another_process_is_busy_and_changes_nothing(
    server: LiveServer,
) -> None:
    with httpx.Client(base_url=server.url + "/api/v1", headers=AUTH, timeout=120) as http:
        assert http.post("/kbs", json={"slug": "notes"}).status_code == 201  # control.db exists now
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_DB, str(server.data / "control.db")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        try:
            r = http.post("/agents", json={"name": "ann"})
            assert r.status_code == 503, r.text  # was 500 `internal`, after 30 s
            assert r.json()["error"]["code"] == "busy" and int(r.headers["Retry-After"]) >= 1
            assert http.get("/kbs/notes").status_code == 200  # reads go on (WAL)
        finally:
            let_go(holder)
        assert http.get("/agents/ann").status_code == 404  # nothing changed
        assert http.post("/agents", json={"name": "ann"}).status_code == 201  # free again
