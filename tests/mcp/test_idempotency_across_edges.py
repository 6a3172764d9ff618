"""One Idempotency-Key over HTTP and MCP compares one normalised write; two keys in a request: refused."""

from __future__ import annotations

import unicodedata

import pytest
from starlette.testclient import TestClient

from kbserver.services import Services
from tests.helpers import git_fsck, state
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio

NFC = unicodedata.normalize("NFC", "notes/café.md")
NFD = unicodedata.normalize("NFD", "notes/café.md")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_key_used_over_http_answers_the_same_write_over_mcp(
    client: TestClient, services: Services, agent: dict[str, str], kb: str, mode: str
) -> None:
    files = [{"path": NFC, "mode": "create", "content": "first\n"}]
    first = client.post(
        f"/api/v1/kbs/{kb}/write", json={"files": files}, headers={**agent, "Idempotency-Key": "k-1"}
    )
    assert first.status_code == 200, first.text
    before = state(services, kb)
    # The same write through MCP, its path in NFD and its message spelled out as null.
    again = [{"path": NFD, "mode": "create", "content": "first\n"}]
    async with memory_client(services, "bob", mode=mode) as mcp:
        repeat = ok(
            await mcp.call_tool("write_context", {"files": again, "message": None, "idempotency_key": "k-1"})
        )
        assert repeat["version"] == first.json()["version"] and state(services, kb) == before
        other = [{"path": NFC, "mode": "create", "content": "other\n"}]
        err = error(await mcp.call_tool("write_context", {"files": other, "idempotency_key": "k-1"}))
        assert err["code"] == "invalid_request" and state(services, kb) == before
    git_fsck(services.repos.path(kb))


async def test_a_key_used_over_mcp_answers_the_same_write_over_http(
    client: TestClient, services: Services, agent: dict[str, str], kb: str
) -> None:
    files = [{"path": "log.md", "mode": "create", "content": "first\n"}]
    async with memory_client(services, "bob", mode="legacy") as mcp:  # a session: its writes name its run
        first = ok(await mcp.call_tool("write_context", {"files": files, "idempotency_key": "k-2"}))
    before = state(services, kb)
    body = {"message": None, "files": files}
    repeat = client.post(f"/api/v1/kbs/{kb}/write", json=body, headers={**agent, "Idempotency-Key": "k-2"})
    assert repeat.status_code == 200 and repeat.json() == first and state(services, kb) == before


@pytest.mark.parametrize(
    "keys",
    [
        [("idempotency-key", "k-3"), ("idempotency-key", "k-3")],
        [("Idempotency-Key", "a"), ("idempotency-key", "b")],
    ],
)
def test_two_idempotency_key_headers_are_refused(
    client: TestClient, services: Services, agent: dict[str, str], kb: str, keys: list[tuple[str, str]]
) -> None:
    before = state(services, kb)
    files = [{"path": "log.md", "mode": "create", "content": "first\n"}]
    answer = client.post(f"/api/v1/kbs/{kb}/write", json={"files": files}, headers=[*agent.items(), *keys])
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and error["field"] == "Idempotency-Key"
    assert "one Idempotency-Key" in error["message"]
    assert state(services, kb) == before
    # Neither key was reserved: each alone now writes.
    alone = client.post(
        f"/api/v1/kbs/{kb}/write", json={"files": files}, headers={**agent, "Idempotency-Key": keys[0][1]}
    )
    assert alone.status_code == 200, alone.text
