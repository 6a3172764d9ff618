"""MCP over Streamable HTTP with a real uvicorn: auth, DNS rebinding, both protocol eras, sessions as runs."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import Field

from kbserver.config import Settings
from kbserver.core.model import WriteRequest
from kbserver.mcp import RUN_TOOL_NAMES, TOOL_NAMES
from kbserver.mcp.http import transport_security
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN, caller_for
from kbserver.services.writing import writes
from tests.helpers import ADMIN_TOKEN, make_agent
from tests.mcp.clients import INITIALIZE, MCP_HEADERS, error, http_client, ok
from tests.mcp.conftest import _Uvicorn

pytestmark = pytest.mark.anyio


async def test_no_or_bad_token_is_401(http_url: str, agent: dict[str, str]) -> None:
    async with httpx2.AsyncClient(base_url=http_url) as hc:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Basic eDp5"}):
            r = await hc.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            assert r.status_code == 401, (headers, r.text)
            body = r.json()  # a JSON-RPC error the client can show, the contract's code in `data`
            assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "unauthorized"
            assert body["error"]["message"].startswith("unauthorized: ")
            assert r.headers["www-authenticate"].startswith("Bearer ")
            assert 'resource_metadata="' in r.headers["www-authenticate"]
        r = await hc.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **agent})
        assert r.status_code == 200 and r.headers["mcp-session-id"]


async def test_unknown_host_is_421(http_url: str, agent: dict[str, str]) -> None:
    async with httpx2.AsyncClient(base_url=http_url) as hc:
        r = await hc.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **agent, "Host": "evil.example.com"}
        )
        assert r.status_code == 421
        r = await hc.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **agent, "Host": "localhost:9"})
        assert r.status_code == 200


def test_allowed_hosts_extend_loopback() -> None:
    settings = transport_security(["kb.example.com", "proxy:8443"])
    assert settings.enable_dns_rebinding_protection
    for host in ("127.0.0.1:*", "localhost:*", "[::1]:*", "kb.example.com", "kb.example.com:*", "proxy:8443"):
        assert host in settings.allowed_hosts
    assert "proxy:8443:*" not in settings.allowed_hosts
    assert "https://kb.example.com" in settings.allowed_origins


async def test_other_routes_still_route(http_url: str, agent: dict[str, str]) -> None:
    async with httpx2.AsyncClient(base_url=http_url) as hc:
        assert (await hc.get("/healthz")).status_code == 200
        assert (await hc.get("/api/v1/kbs", headers=agent)).json()[0]["slug"] == "notes"
        missing = await hc.get("/no-such-page")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_tools_over_http(
    http_url: str, services: Services, agent: dict[str, str], mode: str, version: str
) -> None:
    async with http_client(http_url, agent, mode=mode) as client:
        assert client.protocol_version == version
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(TOOL_NAMES) | set(RUN_TOOL_NAMES)
        readme = ok(await client.call_tool("read_context_file", {"path": "README.md"}))
        written = ok(
            await client.call_tool(
                "write_context",
                {
                    "files": [
                        {
                            "path": "README.md",
                            "mode": "edit",
                            "old_string": "## Index",
                            "new_string": "## Index (edited)",
                            "expected_sha256": readme["sha256"],
                        }
                    ]
                },
            )
        )
        assert written["parent"] == readme["version"]
        err = error(
            await client.call_tool(
                "write_context",
                {"files": [{"path": "README.md", "mode": "delete", "expected_sha256": readme["sha256"]}]},
            )
        )
        assert err["code"] == "stale"
        assert client.instructions and "- notes (read_write): Team notes" in client.instructions


def _run_of(instructions: str | None) -> str:
    assert instructions is not None
    return instructions.split("This session is run ", 1)[1].split(".", 1)[0]


async def test_resources_are_the_session_snapshot(
    http_url: str, services: Services, agent: dict[str, str]
) -> None:
    bob = caller_for(services, "bob")
    first = writes.submit(
        services,
        bob,
        "notes",
        WriteRequest.model_validate(
            {"files": [{"path": "dir/a b.md", "mode": "create", "content": "one\n"}]}
        ),
    )
    uri = "kb://notes/dir/a%20b.md"
    async with http_client(http_url, agent, mode="legacy") as client:
        run = _run_of(client.instructions)
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(listed) == {"kb://notes/README.md", uri}
        assert listed[uri].mime_type == "text/markdown" and listed[uri].size == 4
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {"kb://{slug}/{+path}{?run}", "kb://{slug}@{version}/{+path}"}

        # Someone else changes the file after the session started...
        second = writes.submit(
            services,
            bob,
            "notes",
            WriteRequest.model_validate(
                {"files": [{"path": "dir/a b.md", "mode": "append", "content": "two\n"}]}
            ),
        )
        # ...and this session's own write also lands on the current version.
        mine = ok(
            await client.call_tool(
                "write_context", {"files": [{"path": "dir/a b.md", "mode": "append", "content": "three\n"}]}
            )
        )

        snapshot = (await client.read_resource(uri)).contents[0]
        assert snapshot.text == "one\n"  # type: ignore[union-attr]
        assert snapshot.mime_type == "text/markdown"
        current = ok(await client.call_tool("read_context_file", {"path": "dir/a b.md"}))
        assert current["content"] == "one\ntwo\nthree\n" and current["version"] == mine["version"]
        pinned = await client.read_resource(f"kb://notes@{second.version}/dir/a%20b.md")  # type: ignore[union-attr]
        assert pinned.contents[0].text == "one\ntwo\n"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await client.read_resource("kb://notes/nope.md")
        assert missing.value.error.message.startswith("not_found: ")
        with pytest.raises(MCPError) as hidden:
            await client.read_resource("kb://secret/README.md")
        assert hidden.value.error.message.startswith("not_found: ")

    async with httpx2.AsyncClient(base_url=http_url, headers=agent) as hc:
        newest = (await hc.get("/api/v1/kbs/notes/versions", params={"limit": 3})).json()["versions"]
    assert newest[0]["version"] == mine["version"] and newest[0]["run"] == run
    assert newest[1]["run"] is None and newest[2]["version"] == first.version  # type: ignore[union-attr]

    # Without a session (2026-07-28) there is no run: kb:// shows the current file; @version still works.
    async with http_client(http_url, agent) as client:
        assert client.instructions and "This session is run" not in client.instructions
        now = (await client.read_resource(uri)).contents[0]
        assert now.text == "one\ntwo\nthree\n"  # type: ignore[union-attr]
        old = (await client.read_resource(f"kb://notes@{first.version}/dir/a%20b.md")).contents[0]  # type: ignore[union-attr]
        assert old.text == "one\n"  # type: ignore[union-attr]


async def test_each_session_is_its_own_run(http_url: str, services: Services, agent: dict[str, str]) -> None:
    async with (
        http_client(http_url, agent, mode="legacy") as one,
        http_client(http_url, agent, mode="legacy") as two,
    ):
        assert _run_of(one.instructions) != _run_of(two.instructions)


async def test_instructions_and_reach_follow_the_token(
    http_url: str, services: Services, agent: dict[str, str]
) -> None:
    kbs.create(services, ADMIN, "other", "Other team")
    carol = make_agent(services, "carol", {"other": "read"})
    async with http_client(http_url, carol) as client:
        assert client.instructions and "- other (read): Other team" in client.instructions
        assert "notes" not in client.instructions
        assert ok(await client.call_tool("list_context_files", {}))["kb"] == "other"
        assert error(await client.call_tool("list_context_files", {"kb": "notes"}))["code"] == "not_found"
        assert (
            error(
                await client.call_tool(
                    "write_context", {"files": [{"path": "x.md", "mode": "create", "content": "x"}]}
                )
            )["code"]
            == "forbidden"
        )


async def test_admin_token(http_url: str, services: Services, kb: str) -> None:
    kbs.create(services, ADMIN, "second", "")
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with http_client(http_url, admin, mode="legacy") as client:
        assert client.instructions and "the admin" in client.instructions
        assert error(await client.call_tool("list_context_files", {}))["code"] == "invalid_request"
        done = ok(
            await client.call_tool(
                "write_context",
                {"kb": "second", "files": [{"path": "a.md", "mode": "create", "content": "x\n"}]},
            )
        )
        text = (await client.read_resource("kb://second/a.md")).contents[0].text  # type: ignore[union-attr]
        assert text == "x\n"
    async with httpx2.AsyncClient(base_url=http_url, headers=admin) as hc:
        version: dict[str, Any] = (await hc.get("/api/v1/kbs/second/versions")).json()["versions"][0]
    assert (version["version"], version["kind"], version["author"]) == (
        done["version"],
        "human_edit",
        "admin",
    )


async def test_tool_error_json_on_the_wire(http_url: str, agent: dict[str, str]) -> None:
    """What a non-SDK client sees: `isError` and a text that starts with the code."""
    headers = {**MCP_HEADERS, **agent}
    async with httpx2.AsyncClient(base_url=http_url) as hc:
        init = await hc.post("/mcp", json=INITIALIZE, headers=headers)
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        await hc.post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**headers, **session},
        )
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read_context_file", "arguments": {"path": "nope.md"}},
        }
        r = await hc.post("/mcp", json=call, headers={**headers, **session})
        assert r.status_code == 200
        data = next(json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:"))
        result = data["result"]
        assert result["isError"] is True and result["content"][0]["text"].startswith("not_found: ")
        assert result["structuredContent"]["error"]["code"] == "not_found"
        await hc.delete("/mcp", headers={**headers, **session})


def region_echo(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Echoes its region (a tool whose argument a client mirrors into an Mcp-Param-Region header)."""
    return region


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}


async def test_mcp_param_headers_checked_where_a_tool_declares_them(
    settings: Settings, services: Services, kb: str, agent: dict[str, str]
) -> None:
    """The SDK checks Mcp-Param-* headers against the tool's x-mcp-header declarations; kbserver hands
    it the schema only of tools that declare one (the walk cost ~1 ms a call), so a declared header
    that disagrees is still refused, and headers on a tool without declarations change nothing."""
    server = _Uvicorn(settings, services, extra_tools=[region_echo]).start()
    modern = {**MCP_HEADERS, **agent, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    try:
        async with httpx2.AsyncClient(base_url=server.url) as hc:
            headers = {**modern, "Mcp-Name": "region_echo"}
            declared = _call("region_echo", {"region": "eu"})
            r = await hc.post("/mcp", json=declared, headers={**headers, "Mcp-Param-Region": "us"})
            assert r.status_code == 400 and "Mcp-Param-Region header does not match" in r.text, r.text
            r = await hc.post("/mcp", json=declared, headers=headers)  # declared but missing
            assert r.status_code == 400 and "Mcp-Param-Region header is missing" in r.text, r.text
            r = await hc.post("/mcp", json=declared, headers={**headers, "Mcp-Param-Region": "eu"})
            assert r.status_code == 200 and "error" not in r.json(), r.text
            headers = {**modern, "Mcp-Name": "search_context"}
            plain = _call("search_context", {"kb": kb, "query": "anything"})
            r = await hc.post("/mcp", json=plain, headers={**headers, "Mcp-Param-Query": "else"})
            assert r.status_code == 200 and "error" not in r.json(), r.text
    finally:
        server.stop()


async def test_the_sdk_client_shows_the_servers_message_for_a_bad_token(http_url: str) -> None:
    for headers, text in (
        ({"Authorization": "Bearer not-a-token"}, "the token is not known"),
        ({}, "send Authorization: Bearer TOKEN"),
    ):
        shown = await _refusal(http_url, headers)
        assert shown.startswith("unauthorized: ") and text in shown, shown


async def test_a_control_store_outage_is_a_jsonrpc_503_never_a_plain_500(
    http_url: str, services: Services, agent: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbserver.core.errors import Unavailable

    def unreachable(*args: object) -> None:
        raise Unavailable("the control store did not answer within 10 s")

    monkeypatch.setattr(services.control, "agent_by_token", unreachable)
    async with httpx2.AsyncClient(base_url=http_url) as hc:
        r = await hc.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **agent})
    assert r.status_code == 503 and r.headers["retry-after"].isdigit(), r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "unavailable"
    assert body["error"]["message"].startswith("unavailable: the control store")
    assert (await _refusal(http_url, agent)).startswith("unavailable: the control store")


async def _refusal(url: str, headers: dict[str, str]) -> str:
    """The message of the MCPError the SDK client raises when it cannot even initialize."""
    try:
        async with http_client(url, headers):
            pass
    except BaseException as err:  # the SDK raises it inside its task groups
        found: list[BaseException] = [err]
        while found:
            one = found.pop()
            if isinstance(one, MCPError):
                return str(one)
            found.extend(getattr(one, "exceptions", ()))
        raise
    raise AssertionError("the client initialized")
