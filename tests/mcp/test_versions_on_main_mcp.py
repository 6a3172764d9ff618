"""MCP: a pending proposal's commit is no version, for read_context_file and kb://slug@version/path."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from kbserver.core.model import Create, WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import caller_for
from kbserver.services.models import ProposalAccepted
from kbserver.services.reading import runs
from kbserver.services.writing import writes
from tests.helpers import make_agent
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio


async def test_a_pending_commit_cannot_be_read_over_mcp(services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    make_agent(services, "reader", {kb: "read"})
    asker = caller_for(services, "asker")
    run = runs.start(services, asker, interactive=True)
    req = WriteRequest(
        files=[Create(path="plan.md", mode="create", content="pending content\n")], run_id=run.id
    )
    out = writes.submit(services, asker, kb, req)
    assert isinstance(out, ProposalAccepted)
    row = services.control.proposal(kb, out.proposal.id)
    assert row is not None
    async with memory_client(services, "reader") as client:
        err = error(
            await client.call_tool("read_context_file", {"path": "plan.md", "version": row.ref_commit})
        )
        assert err["code"] == "not_found"
        with pytest.raises(MCPError) as hidden:
            await client.read_resource(f"kb://{kb}@{row.ref_commit}/plan.md")
        assert hidden.value.error.message.startswith("not_found: ")
        assert "pending content" not in str(hidden.value)
        head = services.repos.repo(kb).head()
        readme = ok(await client.call_tool("read_context_file", {"path": "README.md", "version": head}))
        assert readme["version"] == head
