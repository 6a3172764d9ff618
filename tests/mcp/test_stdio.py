"""MCP over stdio: `python -m kbserver.cli mcp --agent bob --data DIR`, next to a running HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx2
import pytest
from mcp import Client, StdioServerParameters

from kbserver.config import Settings
from kbserver.mcp import RUN_TOOL_NAMES, TOOL_NAMES
from kbserver.services import Services
from tests.helpers import REPO_ROOT
from tests.mcp.clients import error, ok

pytestmark = pytest.mark.anyio


def _params(settings: Settings, agent: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return StdioServerParameters(
        command=sys.executable,
        cwd=str(REPO_ROOT),
        env=env,
        args=["-m", "kbserver.cli", "mcp", "--agent", agent, "--data", str(settings.data)],
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_write_is_visible_over_http(
    settings: Settings, services: Services, http_url: str, agent: dict[str, str], mode: str
) -> None:
    async with Client(_params(settings, "bob"), mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(TOOL_NAMES) | set(RUN_TOOL_NAMES)
        assert client.instructions and "- notes (read_write): Team notes" in client.instructions
        assert "This session is run run_" in client.instructions  # one stdio process is one run
        readme = ok(await client.call_tool("read_context_file", {"path": "README.md"}))
        written = ok(
            await client.call_tool(
                "write_context",
                {
                    "message": "from stdio",
                    "files": [
                        {"path": "stdio.md", "mode": "create", "content": "written over stdio\n"},
                        {
                            "path": "README.md",
                            "mode": "append",
                            "content": "- `stdio.md`\n",
                            "expected_sha256": readme["sha256"],
                        },
                    ],
                },
            )
        )
        stale = error(
            await client.call_tool(
                "write_context",
                {
                    "files": [
                        {
                            "path": "README.md",
                            "mode": "overwrite",
                            "content": "x",
                            "expected_sha256": readme["sha256"],
                        }
                    ]
                },
            )
        )
        assert stale["code"] == "stale"
        snapshot = (await client.read_resource("kb://notes/README.md")).contents[0]
        assert "stdio.md" not in snapshot.text  # type: ignore[union-attr]
        hits = ok(await client.call_tool("search_context", {"query": "stdio"}))["hits"]
        assert "stdio.md" in {h["path"] for h in hits}

    async with httpx2.AsyncClient(base_url=http_url, headers=agent) as hc:
        r = await hc.get("/api/v1/kbs/notes/files/stdio.md")
        assert r.status_code == 200 and r.json()["content"] == "written over stdio\n"
        assert r.json()["version"] == written["version"]
        version = (await hc.get("/api/v1/kbs/notes/versions", params={"limit": 1})).json()["versions"][0]
        assert version["message"] == "from stdio" and version["author"] == "agent:bob"
        assert version["run"] and version["run"].startswith("run_")


def test_stdio_unknown_agent_fails_clearly(settings: Settings, services: Services) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", "mcp", "--agent", "nobody", "--data", str(settings.data)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: not_found: agent nobody does not exist")
