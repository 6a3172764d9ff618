"""The reference memory server of bench.peers: `@modelcontextprotocol/server-memory`, over stdio."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

SERVER_MEMORY = "node_modules/@modelcontextprotocol/server-memory/dist/index.js"


class ServerMemory:
    """`@modelcontextprotocol/server-memory` under node, over stdio, with a memory file of its own."""

    name = "server-memory"

    def __init__(self, script: Path, folder: Path) -> None:
        self.script, self.folder = script, folder
        self.client: Any = None
        self.pid = 0
        self.idle = 0.0  # CPU seconds per second doing nothing

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        env = {"MEMORY_FILE_PATH": str(self.folder / "memory.jsonl"), "PATH": os.environ["PATH"]}
        params = StdioServerParameters(command="node", args=[str(self.script)], env=env)
        before = set(_children())
        async with Client(stdio_client(params)) as client:
            self.client = client
            (self.pid,) = set(_children()) - before
            yield

    async def write(self, r: int, i: int, text: str) -> None:
        entity = {"name": f"fact {r}-{i}", "entityType": "fact", "observations": [text]}
        result = await self.client.call_tool("create_entities", {"entities": [entity]})
        assert not result.is_error, result.content

    async def create(self, path: str, text: str) -> None:
        entity = {"name": path, "entityType": "note", "observations": [text]}
        result = await self.client.call_tool("create_entities", {"entities": [entity]})
        assert not result.is_error, result.content

    async def append(self, path: str, text: str, sha256: str) -> None:
        args = {"observations": [{"entityName": path, "contents": [text]}]}
        result = await self.client.call_tool("add_observations", args)
        assert not result.is_error, result.content

    async def search(self, query: str) -> int:
        result = await self.client.call_tool("search_nodes", {"query": query})
        assert not result.is_error, result.content
        found = result.structured_content or json.loads(result.content[0].text)
        return len(found.get("entities", []))

    async def preload(self, texts: list[str]) -> None:
        for start in range(0, len(texts), 100):
            entities = [
                {"name": f"note {n}", "entityType": "note", "observations": [t]}
                for n, t in enumerate(texts[start : start + 100], start)
            ]
            result = await self.client.call_tool("create_entities", {"entities": entities})
            assert not result.is_error, result.content


def _children() -> list[int]:
    me = os.getpid()
    return [int(c) for t in Path(f"/proc/{me}/task").glob("*") for c in (t / "children").read_text().split()]
