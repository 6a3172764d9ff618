"""A credential is refused on every way into a KB, and the refusal leaves no trace in the repository.

Each surface (MCP write_context, every memory tool set, the web admin's Publish, `kbserver import`)
gets the same credential: the answer is `secret_detected` and the KB keeps the same head, the same
files, the same refs, and not one new object file (a blob of the secret would be readable with
`git cat-file` even though no version points to it).
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.cli.test_cli import kbserver
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client
from tests.web.session import log_in

pytestmark = pytest.mark.anyio

_rng = random.Random(20261202)
# made at run time, so no real-looking token sits in the repository
TOKEN = "ghp_" + "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(36))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _trace(services: Services, kb: str) -> tuple[Any, set[str], set[str]]:
    """What a refused call must leave as it was: head and files, every object file, every ref."""
    root = services.repos.path(kb)
    objects = {str(p.relative_to(root)) for p in (root / "objects").rglob("*") if p.is_file()}
    refs = {str(p.relative_to(root)) for p in (root / "refs").rglob("*") if p.is_file()}
    return state(services, kb), objects, refs


TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_context", {"files": [{"path": "k.md", "mode": "create", "content": f"key {TOKEN}\n"}]}),
    ("write_context", {"files": [{"path": "k.md", "mode": "create", "content": "x\n"}], "message": TOKEN}),
    ("write_context", {"files": [{"path": f"{TOKEN}.md", "mode": "create", "content": "x\n"}]}),
    ("memory_add", {"content": f"the deploy token is {TOKEN}"}),
    ("save_memory", {"type": "topic", "name": "deploy", "summary": f"token {TOKEN}"}),
    ("save_memory", {"type": "topic", "name": TOKEN, "summary": "a name that is a token"}),
    ("archive_day", {"date": "2026-11-29", "facts": [f"token {TOKEN}"]}),
    ("add_memory", {"content": f"token {TOKEN}"}),
    ("store_memory", {"content": f"the deploy token is {TOKEN}"}),
    ("memory", {"command": "create", "path": "/memories/k.md", "file_text": f"token {TOKEN}\n"}),
]


@pytest.mark.parametrize(
    ("tool", "args"), TOOL_CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(TOOL_CALLS)]
)
async def test_every_tool_refuses_a_credential_without_a_trace(
    services: Services, kb: str, tool: str, args: dict[str, Any]
) -> None:
    make_agent(
        services,
        "writer",
        {kb: "read_write"},
        tools=["context", "memory", "semantic", "typed", "auto", "memory_tool"],
    )
    before = _trace(services, kb)
    async with memory_client(services, "writer") as client:
        err = error(await client.call_tool(tool, args))
    assert err["code"] == "secret_detected" and err["rule"] == "GitHub Token", err
    assert _trace(services, kb) == before
    git_fsck(services.repos.path(kb))


async def test_edits_that_complete_a_credential_leave_no_trace(services: Services, kb: str) -> None:
    """The halves are harmless alone; the call that joins them is refused (the whole file is scanned)."""
    make_agent(services, "writer", {kb: "read_write"}, tools=["context", "memory_tool"])
    half = len(TOKEN) // 2
    async with memory_client(services, "writer") as client:
        for tool, args in [
            ("write_context", {"files": [{"path": "a.md", "mode": "create", "content": TOKEN[:half]}]}),
            ("memory", {"command": "create", "path": "/memories/b.md", "file_text": TOKEN[:half] + "~\n"}),
        ]:
            assert not (await client.call_tool(tool, args)).is_error
        before = _trace(services, kb)
        for tool, args in [
            ("write_context", {"files": [{"path": "a.md", "mode": "append", "content": TOKEN[half:]}]}),
            (
                "memory",
                {"command": "str_replace", "path": "/memories/b.md", "old_str": "~", "new_str": TOKEN[half:]},
            ),
        ]:
            err = error(await client.call_tool(tool, args))
            assert err["code"] == "secret_detected", (tool, err)
    assert _trace(services, kb) == before


def test_web_publish_refuses_a_credential_without_a_trace(
    client: TestClient, services: Services, kb: str
) -> None:
    csrf = log_in(client)
    before = _trace(services, kb)
    r = client.post(
        "/admin/kbs/notes/publish",
        data={"csrf": csrf, "path": "k.md", "content": f"key {TOKEN}\n", "expected_sha256": ""},
        follow_redirects=False,
    )
    assert r.status_code == 422 and "secret_detected" in r.text, r.text[:500]
    assert _trace(services, kb) == before


def test_import_of_a_folder_holding_a_credential_is_refused_whole(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kbserver(data, "kb", "create", "notes")
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "fine.md").write_text("nothing to see\n")
    (folder / "sub" / "leak.md").write_text(f"token {TOKEN}\n")
    repo = data / "kbs" / "notes.git"

    def trace() -> tuple[set[str], set[str]]:
        return (
            {str(p.relative_to(repo)) for p in (repo / "objects").rglob("*") if p.is_file()},
            {f"{p.relative_to(repo)}={p.read_text()}" for p in (repo / "refs").rglob("*") if p.is_file()},
        )

    before = trace()
    proc = kbserver(data, "import", "notes", str(folder), check=False)
    last = proc.stderr.strip().splitlines()[-1]  # after the progress bar's one final line
    assert proc.returncode == 1 and last.startswith("error: secret_detected: "), proc.stderr
    assert "sub/leak.md" in last and "Traceback" not in proc.stderr
    assert trace() == before  # fine.md was not imported either
    git_fsck(repo)
