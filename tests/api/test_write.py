"""HTTP: the write protocol, every error code of the contract, and 'a rejected call changes nothing'."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import git_fsck, state


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write(client: TestClient, kb: str, headers: dict[str, str], *files: dict[str, Any], **extra: Any) -> Any:
    return client.post(f"/api/v1/kbs/{kb}/write", json={"files": list(files), **extra}, headers=headers)


def test_all_modes_one_version_each(
    client: TestClient, services: Services, kb: str, agent: dict[str, str]
) -> None:
    r = write(
        client,
        kb,
        agent,
        {"path": "log/2026-11.md", "mode": "create", "content": "## a\n"},
        {"path": "notes/x.md", "mode": "create", "content": "hello world\n"},
    )
    assert r.status_code == 200, r.text
    first = r.json()
    assert [f["path"] for f in first["files"]] == ["log/2026-11.md", "notes/x.md"]
    assert first["files"][1] == {"path": "notes/x.md", "mode": "create", "sha256": sha("hello world\n")}
    r = write(
        client,
        kb,
        agent,
        {"path": "log/2026-11.md", "mode": "append", "content": "## b\n", "expected_sha256": sha("## a\n")},
        {"path": "notes/x.md", "mode": "edit", "old_string": "world", "new_string": "kb"},
        message="two changes",
    )
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["parent"] == first["version"]
    r = write(client, kb, agent, {"path": "notes/x.md", "mode": "overwrite", "content": "new\n"})
    assert r.status_code == 200
    r = write(
        client,
        kb,
        agent,
        {"path": "log/2026-11.md", "mode": "delete", "expected_sha256": sha("## a\n## b\n")},
    )
    assert r.status_code == 200
    assert r.json()["files"] == [{"path": "log/2026-11.md", "mode": "delete", "sha256": None}]
    files = {f["path"] for f in client.get(f"/api/v1/kbs/{kb}/files", headers=agent).json()["files"]}
    assert files == {"README.md", "notes/x.md"}
    versions = client.get(f"/api/v1/kbs/{kb}/versions", headers=agent).json()["versions"]
    assert len(versions) == 5  # create + four writes: exactly one version per call
    assert versions[2]["message"] == "two changes"
    assert versions[0]["message"] == "agent write: log/2026-11.md"
    assert versions[3]["message"] == "agent write: 2 files"
    assert {v["kind"] for v in versions[:4]} == {"agent_write"}
    assert versions[0]["author"] == "agent:bob"
    assert versions[2]["paths"] == ["log/2026-11.md", "notes/x.md"]
    git_fsck(services.repos.path(kb))


def test_admin_write_is_a_human_edit(client: TestClient, kb: str, admin: dict[str, str]) -> None:
    r = write(client, kb, admin, {"path": "a.md", "mode": "create", "content": "x"})
    assert r.status_code == 200
    v = client.get(f"/api/v1/kbs/{kb}/versions", headers=admin).json()["versions"][0]
    assert (v["kind"], v["author"], v["message"]) == ("human_edit", "admin", "human edit: a.md")


ERROR_CASES: list[tuple[str, list[dict[str, Any]], int, str]] = [
    ("create existing", [{"path": "README.md", "mode": "create", "content": "x"}], 409, "already_exists"),
    (
        "stale",
        [{"path": "README.md", "mode": "overwrite", "content": "x", "expected_sha256": "0" * 64}],
        409,
        "stale",
    ),
    (
        "no match",
        [{"path": "README.md", "mode": "edit", "old_string": "no such text", "new_string": "y"}],
        422,
        "no_match",
    ),
    (
        "ambiguous",
        [{"path": "twice.md", "mode": "edit", "old_string": "ab", "new_string": "y"}],
        422,
        "ambiguous_match",
    ),
    (
        "too large file",
        [{"path": "big.md", "mode": "create", "content": "x" * (256 * 1024 + 1)}],
        413,
        "too_large",
    ),
    (
        "too many files",
        [{"path": f"f{i}.md", "mode": "create", "content": "x"} for i in range(21)],
        413,
        "too_large",
    ),
    (
        "secret",
        [{"path": "k.md", "mode": "create", "content": "aws key AKIAIOSFODNN7EXAMPLF here"}],
        422,
        "secret_detected",
    ),
    ("missing file", [{"path": "nope.md", "mode": "append", "content": "x"}], 404, "not_found"),
    ("delete missing", [{"path": "nope.md", "mode": "delete"}], 404, "not_found"),
    ("unknown mode", [{"path": "a.md", "mode": "rename", "content": "x"}], 400, "invalid_request"),
    (
        "unknown field",
        [{"path": "a.md", "mode": "create", "content": "x", "extra": 1}],
        400,
        "invalid_request",
    ),
    ("missing content", [{"path": "a.md", "mode": "create"}], 400, "invalid_request"),
    (
        "bad sha format",
        [{"path": "README.md", "mode": "delete", "expected_sha256": "ABC"}],
        400,
        "invalid_request",
    ),
    (
        "duplicate path",
        [
            {"path": "a.md", "mode": "create", "content": "x"},
            {"path": "a.md", "mode": "create", "content": "y"},
        ],
        400,
        "invalid_request",
    ),
    ("leading slash", [{"path": "/a.md", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("dotdot", [{"path": "a/../b.md", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("dot git", [{"path": ".GIT/config", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("ntfs alias", [{"path": "git~1/config", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("backslash", [{"path": "a\\b.md", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("control char", [{"path": "a\x01.md", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("empty segment", [{"path": "a//b.md", "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("long path", [{"path": "a" * 1025, "mode": "create", "content": "x"}], 400, "invalid_request"),
    ("file over folder", [{"path": "folder", "mode": "create", "content": "x"}], 400, "invalid_request"),
    (
        "folder over file",
        [{"path": "README.md/x.md", "mode": "create", "content": "x"}],
        400,
        "invalid_request",
    ),
    ("no files", [], 400, "invalid_request"),
    (
        "later file fails",
        [
            {"path": "ok.md", "mode": "create", "content": "fine"},
            {"path": "README.md", "mode": "create", "content": "x"},
        ],
        409,
        "already_exists",
    ),
]


@pytest.mark.parametrize(("name", "files", "status", "code"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_error_changes_nothing(
    client: TestClient,
    services: Services,
    kb: str,
    agent: dict[str, str],
    name: str,
    files: list[dict[str, Any]],
    status: int,
    code: str,
) -> None:
    setup = write(
        client,
        kb,
        agent,
        {"path": "twice.md", "mode": "create", "content": "ab ab"},
        {"path": "folder/inner.md", "mode": "create", "content": "x"},
    )
    assert setup.status_code == 200
    before = state(services, kb)
    r = write(client, kb, agent, *files)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["message"]
    assert state(services, kb) == before
    if code == "stale":
        assert error["path"] == "README.md" and error["expected_sha256"] == "0" * 64
        assert len(error["actual_sha256"]) == 64
    if code == "secret_detected":
        assert error["path"] == "k.md" and error["rule"]
    git_fsck(services.repos.path(kb))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b"{",
        b'{"files": "x"}',
        b'{"files": [1]}',
        b"\xff\xfe",
        b'{"files": [{"path": 5, "mode": "create", "content": "x"}]}',
        b'{"files": [{"path": "a.md", "mode": "create", "content": "\\ud800"}]}',
        b'{"files": [{"path": "a.md", "mode": "create", "content": "a\\u0000b"}]}',
        b'{"files": [], "bogus": true}',
    ],
)
def test_malformed_bodies_are_400(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], raw: bytes
) -> None:
    before = state(services, kb)
    r = client.post(
        f"/api/v1/kbs/{kb}/write", content=raw, headers={**agent, "content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_request"
    assert state(services, kb) == before


def test_write_to_unknown_kb_is_404(client: TestClient, agent: dict[str, str], admin: dict[str, str]) -> None:
    for who in (agent, admin):
        r = write(client, "nope", who, {"path": "a.md", "mode": "create", "content": "x"})
        assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")


def test_limits_are_per_kb(client: TestClient, services: Services, kb: str, agent: dict[str, str]) -> None:
    services.control.set_limits(kb, {"max_files": 2, "max_file_bytes": 10})
    r = write(client, kb, agent, *[{"path": f"{i}.md", "mode": "create", "content": "x"} for i in range(3)])
    assert (r.status_code, r.json()["error"]["code"]) == (413, "too_large")
    r = write(client, kb, agent, {"path": "a.md", "mode": "create", "content": "x" * 11})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "too_large")
    assert (
        write(client, kb, agent, {"path": "a.md", "mode": "create", "content": "x" * 10}).status_code == 200
    )
