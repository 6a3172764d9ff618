"""Another agent's private memory over MCP (context tools, kb:// resources) and a real `git clone`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from kbserver.services import Services
from tests.helpers import make_agent, state
from tests.mcp.clients import error, http_client, ok
from tests.services.test_privacy import SECRET, _caught_up, private

__all__ = ["private"]  # the fixture, shared with the service-level tests

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs C git on the PATH")


@pytest.mark.anyio
async def test_the_context_tools_and_git_clone_over_http(
    services: Services, kb: str, private: dict[str, str], http_url: str, tmp_path: Path
) -> None:
    _caught_up(services, kb)
    path = private["path"]
    bob = make_agent(services, "carol", {kb: "read_write"}, tools=["context"])
    before = state(services, kb)
    async with http_client(http_url, bob) as client:
        assert (
            error(await client.call_tool("read_context_file", {"kb": kb, "path": path}))["code"]
            == "not_found"
        )
        hits = ok(await client.call_tool("search_context", {"kb": kb, "query": "salary"}))["hits"]
        assert path not in {h["path"] for h in hits} and hits
        refused = error(
            await client.call_tool(
                "write_context", {"kb": kb, "files": [{"path": path, "mode": "overwrite", "content": "x"}]}
            )
        )
        assert refused["code"] == "forbidden"
        listed = ok(await client.call_tool("list_context_versions", {"kb": kb}))
        assert private["version"] not in str(listed)
        with pytest.raises(MCPError) as hidden:
            await client.read_resource(f"kb://{kb}@{private['version']}/{path}")  # type: ignore[arg-type]
        with pytest.raises(MCPError):
            await client.read_resource(f"kb://{kb}/{path}")  # type: ignore[arg-type]
        listed_files = await client.list_resources()
    assert "not_found" in str(hidden.value) and SECRET not in str(hidden.value)
    assert path not in str(listed_files)
    assert state(services, kb) == before
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    token = bob["Authorization"].split(" ", 1)[1]
    url = http_url.replace("http://", f"http://x:{token}@") + f"/git/{kb}.git"
    cloned = subprocess.run(
        ["git", "clone", url, str(tmp_path / "c")], capture_output=True, text=True, env=env
    )
    assert cloned.returncode != 0 and not (tmp_path / "c" / path).exists()
