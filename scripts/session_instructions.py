"""Print the MCP instructions an example agent receives at session start (a real run, for the README).

    python scripts/session_instructions.py

Builds a throw-away data folder: KB `team`, agent `planner` (tools context,auto) and its child
`helper` (`--parent planner`, tools context,auto,typed), each remembering a few facts with
add_memory over stdio (`kbserver mcp`), then prints what `helper` is told when a session starts.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


def kbserver(data: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "kbserver.cli", *args, "--data", str(data)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


def params(data: Path, agent: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        args=["-m", "kbserver.cli", "mcp", "--agent", agent, "--data", str(data)],
    )


async def remember(data: Path, agent: str, facts: list[str]) -> str:
    async with Client(params(data, agent), mode="legacy") as client:
        for fact in facts:
            result = await client.call_tool("add_memory", {"content": fact})
            assert not result.is_error, result.content
    async with Client(params(data, agent), mode="legacy") as client:
        return client.instructions or ""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "kbdata"
        kbserver(data, "kb", "create", "team", "--description", "Shared memory of the planning agents")
        kbserver(data, "agent", "create", "planner", "--tools", "context,auto")
        kbserver(data, "agent", "create", "helper", "--parent", "planner", "--tools", "context,auto,typed")
        for agent in ("planner", "helper"):
            kbserver(data, "link", agent, "team", "--permission", "read_write")
        asyncio.run(
            remember(
                data, "planner", ["The team deploys on Tuesdays only", "Staging is at staging.example.org"]
            )
        )
        text = asyncio.run(remember(data, "helper", ["Ana prefers summaries in Portuguese"]))
    print(text)


if __name__ == "__main__":
    main()
