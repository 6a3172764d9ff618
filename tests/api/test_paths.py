"""Paths over HTTP (CONTRACT.md §3, Paths): NFC on reads and writes, case clashes, names every clone holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from kbserver.store import CommitPlan
from tests.helpers import ADMIN_TOKEN, git_fsck, state

NFC, NFD = "caf\u00e9.md", "cafe\u0301.md"


def _write(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files)}, headers=headers)


def _create(path: str, content: str = "x\n") -> dict[str, str]:
    return {"path": path, "mode": "create", "content": content}


@pytest.mark.parametrize(
    "path",
    [
        "x" * 1021 + ".md",  # one segment over 255 bytes: git clone fails on it
        "a/" + "\u00e9" * 130,
        "evil\u202egnp.md",  # a bidi override makes it show as evilpng.md...
        "zero\u200bwidth.md",
        "CON",
        "aux.txt",
        "notes/Nul.md",
        "trail. ",
        "trail.",
        "space /a.md",
        ".gitmodules",
        "sub/.GITATTRIBUTES",
        "gitmod~1",
        ".gitmodules::$DATA",
    ],
)
def test_names_a_clone_cannot_hold_are_refused(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], path: str
) -> None:
    before = state(services, kb)
    r = _write(client, kb, agent, _create(path))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_request"
    assert state(services, kb) == before


@pytest.mark.parametrize(
    ("existing", "new"), [("case.md", "Case.md"), ("notes/a.md", "Notes/b.md"), (NFC, "CAF\u00c9.md")]
)
def test_a_path_differing_only_by_case_is_already_exists(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], existing: str, new: str
) -> None:
    assert _write(client, kb, agent, _create(existing)).status_code == 200
    before = state(services, kb)
    r = _write(client, kb, agent, _create(new))
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "already_exists"
    assert state(services, kb) == before


def test_case_variants_in_one_write_change_nothing(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    before = state(services, kb)
    r = _write(client, kb, agent, _create("a.md"), _create("A.md"))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    assert state(services, kb) == before


def test_nfc_and_nfd_are_one_file_on_reads_and_writes(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    r = _write(client, kb, agent, _create(NFD, "one\n"))
    assert r.status_code == 200 and r.json()["files"][0]["path"] == NFC
    assert set(state(services, kb)[1]) == {"README.md", NFC}
    before = state(services, kb)
    again = _write(client, kb, agent, _create(NFC, "two\n"))
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"
    assert state(services, kb) == before
    for spelling in (NFC, NFD):
        got = client.get(f"/api/v1/kbs/{kb}/files/{spelling}", headers=agent)
        assert got.status_code == 200 and got.json()["path"] == NFC and got.json()["content"] == "one\n"
        listed = client.get(f"/api/v1/kbs/{kb}/files", params={"prefix": spelling[:5]}, headers=agent)
        assert [f["path"] for f in listed.json()["files"]] == [NFC]
        history = client.get(f"/api/v1/kbs/{kb}/versions", params={"path": spelling}, headers=agent)
        assert len(history.json()["versions"]) == 1
    appended = _write(client, kb, agent, {"path": NFD, "mode": "append", "content": "more\n"})
    assert appended.status_code == 200 and appended.json()["files"][0]["path"] == NFC
    git_fsck(services.repos.path(kb))


def _legacy_file(services: Services, kb: str, path: str) -> None:
    """A file stored before the path rules existed (written below the write engine)."""
    _, writer = services.repos.get(kb)
    writer.submit(lambda _tip: CommitPlan({path: b"old\n"}, "legacy", "admin <admin@kbserver.invalid>"))


def test_mount_of_a_name_the_file_system_refuses_leaves_nothing(
    tmp_path: Path, services: Services, kb: str
) -> None:
    _legacy_file(services, kb, "notes/" + "x" * 300 + ".md")
    services.close()
    target = tmp_path / "mnt" / "copy"
    proc = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", "mount", kb, str(target), "--data", str(services.data)],
        capture_output=True,
        text=True,
        env={**os.environ, "KBSERVER_ADMIN_TOKEN": ADMIN_TOKEN},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: invalid_request: cannot write notes/xxx" in proc.stderr, proc.stderr
    assert "File name too long; nothing was written" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not target.exists()
    assert list((tmp_path / "mnt").iterdir()) == []  # no half-written staging folder either
