"""The whole OAuth flow with the official SDK client against a running server, the person signing
in and answering the consent page in Chromium: 401 -> discovery -> registration -> authorize ->
consent -> token -> write_context, committed as the agent the person chose."""

from __future__ import annotations

import subprocess

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from kbserver.config import Settings
from kbserver.services import Services, kbs
from kbserver.services.access import connections, people
from kbserver.services.access.auth import ADMIN
from tests.helpers import git_fsck
from tests.mcp.clients import ok
from tests.mcp.oauth_helpers import Consent, chromium_missing, oauth_server, sdk_oauth

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(chromium_missing(), reason="needs Debian's chromium"),
    pytest.mark.timeout(300),
]


async def test_sdk_client_connects_through_consent_and_writes_as_the_chosen_agent(
    settings: Settings, services: Services
) -> None:
    kbs.create(services, ADMIN, "notes", "Team notes")
    kbs.create(services, ADMIN, "other", "Not for the chat")
    consent = Consent(name="chat-bot", permissions={"notes": "read_write", "other": ""})
    with oauth_server(settings, services) as base:
        auth, storage = sdk_oauth(base, consent)
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60)) as hc:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=hc)) as client:
                written = ok(
                    await client.call_tool(
                        "write_context",
                        {
                            "kb": "notes",
                            "files": [{"path": "chat.md", "mode": "create", "content": "from the chat\n"}],
                        },
                    )
                )
                listed = ok(await client.call_tool("list_context_files", {"kb": "notes"}))
                assert "chat.md" in [f["path"] for f in listed["files"]]
                refused = await client.call_tool("list_context_files", {"kb": "other"})
                assert refused.is_error  # the person gave no access there
    # What the page said: the client's own (unverified) name, and a form-action that lets the browser
    # go back to the client's redirect URI.
    assert "Test Chat" in consent.seen["text"] and "not verified" in consent.seen["text"]
    assert "form-action 'self' http://127.0.0.1:" in consent.seen["csp"]
    # The commit's actor is the agent chosen on the consent page.
    repo = services.repos.path("notes")
    log = subprocess.run(
        ["git", "log", "-1", "--format=%an%n%B", written["version"]], cwd=repo, capture_output=True, text=True
    ).stdout
    assert "Kb-Actor: agent:chat-bot" in log, log
    git_fsck(repo)
    # The new agent has exactly the links chosen; its connection is listed, made by the admin.
    agent = services.control.agent("chat-bot")
    assert agent is not None and agent.links == {"notes": "read_write"}
    (grant,) = connections.listing(services, ADMIN)["chat-bot"]
    assert (grant.client_name, grant.person, grant.resource) == ("Test Chat", "admin", f"{base}/mcp")
    assert grant.last_used is not None
    assert storage.tokens is not None and storage.tokens.refresh_token


async def test_revoked_connection_and_deleted_agent_stop_at_the_next_request(
    settings: Settings, services: Services
) -> None:
    kbs.create(services, ADMIN, "notes", "Team notes")
    consent = Consent(name="chat-bot", permissions={"notes": "read"})
    with oauth_server(settings, services) as base:
        auth, storage = sdk_oauth(base, consent)
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60)) as hc:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=hc)) as client:
                ok(await client.call_tool("list_context_files", {"kb": "notes"}))
        assert storage.tokens is not None
        token = storage.tokens.access_token
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as hc:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=hc)) as client:
                ok(await client.call_tool("list_context_files", {"kb": "notes"}))  # the bare token works
                (grant,) = connections.listing(services, ADMIN)["chat-bot"]
                connections.revoke(services, ADMIN, grant.id)
                with pytest.raises(MCPError, match="unauthorized"):
                    await client.call_tool("list_context_files", {"kb": "notes"})


async def test_a_viewer_connects_a_chat_that_may_only_read(settings: Settings, services: Services) -> None:
    """Signed in as a viewer (email and password), the consent page offers `read` only, and the
    connection is recorded as the viewer's."""
    kbs.create(services, ADMIN, "notes", "Team notes")
    people.create(services, ADMIN, "vera", "vera@example.org", "viewer", [], "a long pass phrase 42")
    consent = Consent(name="vera-chat", login=("vera@example.org", "a long pass phrase 42"))
    with oauth_server(settings, services) as base:
        auth, _storage = sdk_oauth(base, consent)
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60)) as hc:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=hc)) as client:
                ok(await client.call_tool("list_context_files", {"kb": "notes"}))
                change = {"kb": "notes", "files": [{"path": "x.md", "mode": "create", "content": "x\n"}]}
                assert (await client.call_tool("write_context", change)).is_error  # read only
    assert consent.seen["choices"] == {"kb-notes": ["no access", "read"]}
    assert "signed in as vera" in consent.seen["text"]
    agent = services.control.agent("vera-chat")
    assert agent is not None and agent.links == {"notes": "read"}
    (grant,) = connections.listing(services, ADMIN)["vera-chat"]
    assert grant.person == "vera"
