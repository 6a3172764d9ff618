"""`kbserver mount --url` and `--update`, in a subprocess against a real server over HTTP only (no data
folder): byte-for-byte copies, read-only, their source beside them, updates that touch only what changed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
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
from tests.helpers import REPO_ROOT, make_agent, python_probe
from tests.mcp.conftest import _Uvicorn


@pytest.fixture
def url(settings: Settings, services: Services) -> Iterator[str]:
    server = _Uvicorn(settings, services).start()
    yield server.url
    server.stop()


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """The sandbox host's folder: nothing of the server's in it."""
    folder = tmp_path / "host"
    folder.mkdir()
    return folder


@pytest.fixture
def token(services: Services, kb: str) -> str:
    make_agent(services, "bob", {kb: "read_write"})
    _, secret = agents.rotate(services, ADMIN, "bob")
    return secret


def kbserver(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a sandbox host runs it: no data folder, no KBSERVER_ settings but `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KBSERVER_")}
    return subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        timeout=300,
    )


def write(services: Services, kb: str, *files: dict[str, str]) -> str:
    return writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": list(files)})).version


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None) under `folder`, by relative path."""
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        out[path.relative_to(folder).as_posix()] = None if path.is_dir() else path.read_bytes()
    return out


def kb_files(services: Services, kb: str, version: str | None = None) -> dict[str, bytes]:
    repo = services.repos.repo(kb)
    view = repo.view(version or repo.head())
    return {path: repo.blob(blob.decode()) for path, blob in view.walk()}


def files_of(folder: Path) -> dict[str, bytes]:
    return {k: v for k, v in tree(folder).items() if v is not None}


def assert_read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o555 if path.is_dir() else 0o444), (path, oct(mode))


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def refused(done: subprocess.CompletedProcess[str], code: str) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: {code}: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[-1]


SEED = [
    {"path": "notes/a.md", "mode": "create", "content": "alpha\n"},
    {"path": "notes/deep/b.md", "mode": "create", "content": "beta\n"},
    {"path": "old/x.md", "mode": "create", "content": "x\n"},
    {"path": "old/y.md", "mode": "create", "content": "y\n"},
    {"path": "咖啡/笔记.md", "mode": "create", "content": "浓缩咖啡需要九个大气压。\n"},
    {"path": "gone.md", "mode": "create", "content": "to be deleted\n"},
]


def test_a_mount_over_http_is_the_version_read_only_with_its_source(
    host: Path, url: str, token: str, services: Services, kb: str
) -> None:
    version = write(services, kb, *SEED)
    out = ok(kbserver("mount", "--url", url, "--token", token, "--kb", kb, "copy", cwd=host))
    assert f"version {version}" in out
    copy = host / "copy"
    assert files_of(copy) == kb_files(services, kb)
    assert_read_only(copy)
    source = host / ".copy.kbserver-mount.json"
    recorded = json.loads(source.read_text())
    assert recorded == {"url": url, "slug": kb, "version": version, "run": None}
    assert token not in source.read_text()
    assert sorted(p.name for p in host.iterdir()) == [".copy.kbserver-mount.json", "copy"]  # no staging
    again = kbserver("mount", "--url", url, "--token", token, "--kb", kb, "copy", cwd=host)
    refused(again, "invalid_request")  # not into a folder that holds files
    assert files_of(copy) == kb_files(services, kb)


def test_a_mount_of_a_run_is_its_pinned_version(
    host: Path, url: str, token: str, services: Services, kb: str, client: TestClient
) -> None:
    pinned = write(services, kb, *SEED)
    run = client.post("/api/v1/runs", json={}, headers={"Authorization": f"Bearer {token}"}).json()["id"]
    write(services, kb, {"path": "notes/a.md", "mode": "overwrite", "content": "later\n"})
    ok(kbserver("mount", "--url", url, "--token", token, "--run", run, "ctx", cwd=host))
    assert files_of(host / "ctx" / kb) == kb_files(services, kb, pinned)
    assert json.loads((host / "ctx" / f".{kb}.kbserver-mount.json").read_text())["run"] == run


def test_update_equals_a_fresh_mount_and_leaves_unchanged_files_alone(
    host: Path, url: str, token: str, services: Services, kb: str
) -> None:
    write(services, kb, *SEED)
    ok(kbserver("mount", "--url", url, "--token", token, "--kb", kb, "copy", cwd=host))
    copy = host / "copy"
    before = {p: (copy / p).stat() for p in ("README.md", "notes/deep/b.md", "咖啡/笔记.md")}
    head = write(
        services,
        kb,
        {"path": "notes/a.md", "mode": "append", "content": "more\n"},  # changed
        {"path": "gone.md", "mode": "delete"},  # deleted
        {"path": "old/x.md", "mode": "delete"},  # a renamed folder: old/ -> new/
        {"path": "old/y.md", "mode": "delete"},
        {"path": "new/x.md", "mode": "create", "content": "x\n"},
        {"path": "new/y.md", "mode": "create", "content": "y\n"},
        {"path": "notes/deep/c.md", "mode": "create", "content": "gamma\n"},  # added
    )
    out = ok(kbserver("mount", "--update", "copy", "--token", token, cwd=host))
    assert f"version {head}" in out and "4 written, 3 deleted" in out
    ok(kbserver("mount", "--url", url, "--token", token, "--kb", kb, "fresh", cwd=host))
    assert tree(copy) == tree(host / "fresh")  # byte for byte, folders included (old/ is gone)
    assert_read_only(copy)
    for path, st in before.items():
        now = (copy / path).stat()
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), path  # not rewritten
    assert json.loads((host / ".copy.kbserver-mount.json").read_text())["version"] == head
    again = ok(kbserver("mount", "--update", "copy", "--token", token, cwd=host))
    assert "0 written, 0 deleted" in again


def test_update_follows_a_file_that_became_a_folder_and_back(
    host: Path, url: str, token: str, services: Services, kb: str
) -> None:
    write(services, kb, *SEED)
    ok(kbserver("mount", "--url", url, "--token", token, "--kb", kb, "copy", cwd=host))
    # A file that becomes a folder, a folder that becomes a file (two versions each: one write may
    # not do both to a path), seen by the copy as one update.
    write(
        services,
        kb,
        {"path": "gone.md", "mode": "delete"},
        {"path": "old/x.md", "mode": "delete"},
        {"path": "old/y.md", "mode": "delete"},
    )
    write(
        services,
        kb,
        {"path": "gone.md/inside.md", "mode": "create", "content": "now a folder\n"},
        {"path": "old", "mode": "create", "content": "now a file\n"},
    )
    ok(kbserver("mount", "--update", "copy", "--token", token, cwd=host))
    ok(kbserver("mount", "--url", url, "--token", token, "--kb", kb, "fresh", cwd=host))
    assert tree(host / "copy") == tree(host / "fresh")
    assert_read_only(host / "copy")


def test_mount_errors_are_one_line_and_change_nothing(
    host: Path, url: str, token: str, services: Services, kb: str
) -> None:
    refused(
        kbserver("mount", "--url", url, "--token", "kbs_wrong", "--kb", kb, "c", cwd=host), "unauthorized"
    )
    refused(kbserver("mount", "--url", url, "--token", token, "--kb", "nope", "c", cwd=host), "not_found")
    refused(
        kbserver("mount", "--url", url, "--token", token, "--kb", kb, "--version", "f" * 40, "c", cwd=host),
        "not_found",
    )
    refused(
        kbserver("mount", "--url", url, "--token", token, "--run", "run_nope", "c", cwd=host), "not_found"
    )
    refused(kbserver("mount", "--url", url, "--kb", kb, "c", cwd=host), "invalid_request")  # no token
    refused(
        kbserver("mount", "--url", "ftp://x", "--token", token, "--kb", kb, "c", cwd=host),
        "invalid_request",
    )
    refused(
        kbserver("mount", "--url", url, "--token", token, "--kb", kb, "--run", "r", "c", cwd=host),
        "invalid_request",
    )
    refused(kbserver("mount", "--update", "c", "--token", token, cwd=host), "not_found")
    port_closed = "http://127.0.0.1:9"
    refused(
        kbserver("mount", "--url", port_closed, "--token", token, "--kb", kb, "c", cwd=host),
        "unavailable",
    )
    assert list(host.iterdir()) == []


def test_the_local_form_still_works(host: Path, services: Services, settings: Settings, kb: str) -> None:
    write(services, kb, *SEED)
    env = {"KBSERVER_ADMIN_TOKEN": "test-admin-token"}
    ok(kbserver("mount", kb, "local", "--data", str(settings.data), cwd=host, env=env))
    assert files_of(host / "local") == kb_files(services, kb)
    assert_read_only(host / "local")


def test_the_http_commands_start_without_the_storage(host: Path) -> None:
    """`mount --url`, `--update` and `run` import neither the services nor the storage and index
    (seconds on a busy machine), so a sandbox host's command starts at once."""
    probe = (
        "import sys; from kbserver.cli import main; "
        "code = main(['mount', '--url', 'ftp://nowhere', '--kb', 'a', 'd']); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('kbserver.services', 'kbserver.store'))))"
    )
    done = python_probe(probe, host)
    assert done.stdout.strip() == "1 []", done.stdout + done.stderr
    assert done.stderr.startswith("error: invalid_request: --url must be")
