"""A dialect from an installed package: the toy dialect (tests/dialects/toy) is built into a wheel,
installed with pip, and served by a real `kbserver serve`, found through its `kbserver.dialects`
entry point; an agent with the `toy` tool set calls its tool over MCP with the official client."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from kbserver.core.errors import InvalidRequest
from kbserver.dialects import registry
from kbserver.dialects.registry import Dialect
from tests.helpers import ADMIN_TOKEN, LiveServer
from tests.mcp.clients import error, http_client, ok
from tests.plugins import build_wheel, install_wheel

TOY = Path(__file__).parent / "toy"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.mark.slow
def test_an_installed_dialect_is_served_over_mcp(tmp_path: Path) -> None:
    env = install_wheel(build_wheel(TOY, tmp_path), tmp_path / "site")
    server = LiveServer(tmp_path / "data", env=env).start()
    try:
        api = f"{server.url}/api/v1"
        spec = httpx.get(f"{server.url}/openapi.json", timeout=30)
        enum = spec.json()["components"]["schemas"]["AgentCreate"]["properties"]["tools"]["items"]["enum"]
        assert enum[-1] == "toy" and "memory" in enum  # the API's ToolSet is derived, plug-ins included
        made = httpx.post(f"{api}/agents", json={"name": "tia", "tools": ["context", "toy"]}, headers=ADMIN)
        assert made.status_code in (200, 201), made.text
        link = httpx.post(
            f"{api}/agents/tia/links", json={"kb": "sample", "permission": "read_write"}, headers=ADMIN
        )
        assert link.status_code in (200, 201), link.text
        before = httpx.get(f"{api}/kbs/sample/versions", headers=ADMIN, timeout=30).json()["versions"]

        async def calls() -> None:
            async with http_client(server.url, {"Authorization": f"Bearer {made.json()['token']}"}) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert "toy_note" in tools and "memory_add" not in tools
                assert set(tools["toy_note"].output_schema["properties"]) >= {"path", "version", "error"}  # type: ignore[index]
                note = ok(await client.call_tool("toy_note", {"text": "tea at four"}))
                assert note["path"] == "toy/1.md" and len(note["version"]) == 40
                # toy/ is reserved for the toy tools: a plain write there is refused
                files = [{"path": "toy/2.md", "mode": "create", "content": "x"}]
                refused = error(await client.call_tool("write_context", {"files": files}))
                assert refused["code"] == "forbidden" and "toy note" in refused["message"]

        anyio.run(calls)
        after = httpx.get(f"{api}/kbs/sample/versions", headers=ADMIN, timeout=30).json()["versions"]
        assert len(after) == len(before) + 1 and after[0]["message"].startswith("toy: a note")
        read = httpx.get(f"{api}/kbs/sample/files/toy/1.md", headers=ADMIN, timeout=30)
        assert read.status_code == 200 and "tea at four" in read.text
    finally:
        server.stop()


def test_a_broken_plugin_is_one_clear_error_at_start(tmp_path: Path) -> None:
    """A plug-in that cannot be imported, or that takes a set or tool name already taken, stops the
    start with one error naming it."""
    cases = {
        "broken": (
            b"raise RuntimeError('boom')\n",
            "toy (toy_dialect:DIALECT, entry point of kbserver.dialects): cannot be loaded",
        ),
        "clash": (
            b"from kbserver.dialects.registry import Dialect\n"
            b"DIALECT = Dialect(name='toy', tools=('memory_add',), bind='x:y')\n",
            "the tool 'memory_add' is already the memory set's",
        ),
    }
    for case, (source, said) in cases.items():
        site = tmp_path / case
        built = tmp_path / f"{case}-wheel"
        built.mkdir()
        env = install_wheel(build_wheel(TOY, built, {"toy_dialect.py": source}), site)
        proc = subprocess.run(
            [sys.executable, "-c", "from kbserver.dialects import registry; registry.dialects()"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0 and said in proc.stderr, (case, proc.stderr[-2000:])
        assert proc.stderr.count("InvalidRequest: dialect toy") == 1, proc.stderr[-2000:]


def test_declarations_are_checked() -> None:
    base = registry.dialects()[0]
    with pytest.raises(InvalidRequest, match="declared twice"):
        registry._check(base, "again", {t: base.name for t in base.tools})
    with pytest.raises(InvalidRequest, match="not 'module:function'"):
        registry._check(Dialect(name="x1", tools=("x1_a",), bind="nocolon"), "x1", {})
    with pytest.raises(InvalidRequest, match="results names tools"):
        registry._check(Dialect(name="x2", tools=("x2_a",), bind="m:f", results={"x2_b": dict}), "x2", {})
    assert registry.tool_set_names()[:6] == ("context", "memory", "semantic", "typed", "auto", "memory_tool")


def test_a_binder_must_publish_the_declared_results() -> None:
    """The MCP edge refuses a binder whose outputSchema is not the dialect's declared result type."""
    from kbserver.dialects import results
    from kbserver.mcp import dialects as mcp_dialects
    from kbserver.mcp.binders import auto as auto_binder

    auto = next(d for d in registry.dialects() if d.name == "auto")
    add = auto_binder.tools(None)[0]  # type: ignore[arg-type]  # building a tool calls nothing
    mcp_dialects._check_result(auto, add)
    wrong = dataclasses.replace(auto, results={"add_memory": results.AddResult})
    with pytest.raises(InvalidRequest, match="add_memory publishes the result fields"):
        mcp_dialects._check_result(wrong, add)
