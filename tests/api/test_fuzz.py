"""Fuzz: no input produces a 5xx or a traceback, and every error has the contract's shape, on both
control stores (fewer examples on PostgreSQL, where each one costs a database round trip or more)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from kbserver.config import Settings
from kbserver.dialects.registry import tool_set_names
from kbserver.services import Services
from tests.helpers import git_fsck, state

PG_EXAMPLES = 25  # examples of each test that run on PostgreSQL (the rest pass without a request)


@pytest.fixture(name="settings")
def _settings(settings_on_both_stores: Settings) -> Settings:
    """Every test here runs on both control stores (SQLite and PostgreSQL)."""
    return settings_on_both_stores


class _Budget:
    def __init__(self, postgres: bool) -> None:
        self.left = PG_EXAMPLES if postgres else None

    def spent(self) -> bool:
        """True once this test's examples on PostgreSQL are used up (the example does nothing)."""
        if self.left is None:
            return False
        self.left -= 1
        return self.left < 0


@pytest.fixture
def budget(settings_on_both_stores: Settings) -> _Budget:
    return _Budget(settings_on_both_stores.control_url is not None)


CODES = {
    "invalid_request",
    "unauthorized",
    "forbidden",
    "not_found",
    "already_exists",
    "stale",
    "no_match",
    "ambiguous_match",
    "too_large",
    "secret_detected",
    "approval_unavailable",
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
file_change = st.fixed_dictionaries(
    {
        "path": st.one_of(st.text(max_size=30), st.sampled_from(["README.md", "a.md", "x/../y", ".git/x"])),
        "mode": st.sampled_from(["create", "append", "edit", "overwrite", "delete", "bogus"]),
    },
    optional={
        "content": st.text(max_size=50),
        "old_string": st.text(max_size=5),
        "new_string": st.text(max_size=5),
        "expected_sha256": st.one_of(st.text(max_size=64), st.just("0" * 64)),
        "extra": json_values,
    },
)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"files": st.lists(file_change, max_size=4)}, optional={"message": json_values, "run_id": json_values}
    ),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def check(r: Any) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        body = r.json()
        assert set(body) == {"error"} and body["error"]["code"] in CODES, body
        assert isinstance(body["error"]["message"], str) and "Traceback" not in r.text


@FUZZ
@given(body=bodies)
def test_write_bodies(
    client: TestClient, services: Services, kb: str, agent: dict[str, str], body: Any, budget: _Budget
) -> None:
    if budget.spent():
        return
    before = state(services, kb)
    r = client.post(f"/api/v1/kbs/{kb}/write", content=json.dumps(body), headers=agent)
    check(r)
    if r.status_code != 200:
        assert state(services, kb) == before


@FUZZ
@given(raw=st.binary(max_size=200))
def test_raw_bytes(client: TestClient, kb: str, agent: dict[str, str], raw: bytes, budget: _Budget) -> None:
    if budget.spent():
        return
    for url in (f"/api/v1/kbs/{kb}/write", f"/api/v1/kbs/{kb}/revert", "/api/v1/runs", "/api/v1/kbs"):
        check(client.post(url, content=raw, headers=agent))


@FUZZ
@given(
    segment=st.text(max_size=40),
    params=st.dictionaries(
        st.sampled_from(
            [
                "q",
                "limit",
                "offset",
                "prefix",
                "version",
                "path",
                "cursor",
                "wait_for",
                "timeout",
                "status",
                "x",
            ]
        ),
        st.text(max_size=20),
        max_size=4,
    ),
)
def test_paths_and_queries(
    client: TestClient, kb: str, agent: dict[str, str], segment: str, params: dict[str, str], budget: _Budget
) -> None:
    if budget.spent():
        return
    segment = quote(segment, safe="/")
    for url in (
        f"/api/v1/kbs/{kb}/files/{segment}",
        f"/api/v1/kbs/{kb}/versions/{segment}",
        f"/api/v1/kbs/{segment}",
        f"/api/v1/kbs/{kb}/search",
        f"/api/v1/kbs/{kb}/versions",
        f"/api/v1/kbs/{kb}/files",
        f"/api/v1/kbs/{kb}/proposals",
        f"/api/v1/runs/{segment}/kbs/{kb}/files",
    ):
        if "timeout" in params:
            params = {**params, "timeout": "0"}
        check(client.get(url, params=params, headers=agent))


# --- admin calls ---------------------------------------------------------------------------------

ADMIN_HEADERS = {"Authorization": "Bearer test-admin-token"}
admin_calls = st.sampled_from(
    [
        ("POST", "/api/v1/kbs"),
        ("POST", "/api/v1/agents"),
        ("POST", "/api/v1/agents/bob/links"),
        ("POST", "/api/v1/agents/{segment}/links"),
        ("DELETE", "/api/v1/agents/{segment}"),
        ("DELETE", "/api/v1/agents/bob/links/{segment}"),
        ("POST", "/api/v1/agents/{segment}/token"),
        ("POST", "/api/v1/kbs/{kb}/write"),
        ("POST", "/api/v1/kbs/{kb}/revert"),
        ("POST", "/api/v1/kbs/{kb}/review"),
        ("POST", "/api/v1/kbs/{kb}/versions/{segment}/undo"),
        ("POST", "/api/v1/kbs/{kb}/proposals/{segment}/approve"),
        ("POST", "/api/v1/kbs/{kb}/proposals/{segment}/reject"),
        ("GET", "/api/v1/kbs/{segment}/files"),
        ("GET", "/api/v1/agents/{segment}"),
    ]
)
admin_bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "slug": st.one_of(st.text(max_size=70), st.just("notes"), st.just("../outside")),
            "description": json_values,
            "name": st.one_of(st.text(max_size=70), st.just("bob")),
            "parent": json_values,
            "tools": st.one_of(
                json_values, st.lists(st.sampled_from(["context", "memory", "x"]), max_size=3)
            ),
            "auto_record": json_values,
            "kb": st.one_of(st.text(max_size=20), st.just("notes")),
            "permission": st.one_of(st.text(max_size=20), st.sampled_from(["read", "read_write", "admin"])),
            "version": st.one_of(st.text(max_size=45), st.just("0" * 40)),
            "message": json_values,
            "reason": json_values,
        },
    ),
)


@FUZZ
@given(call=admin_calls, segment=st.text(max_size=30), body=admin_bodies)
def test_admin_calls(
    client: TestClient,
    services: Services,
    kb: str,
    agent: dict[str, str],
    call: tuple[str, str],
    segment: str,
    body: Any,
    budget: _Budget,
) -> None:
    if budget.spent():
        return
    method, template = call
    url = template.format(kb=kb, segment=quote(segment, safe="") or "x")
    before = state(services, kb)
    r = client.request(method, url, content=json.dumps(body), headers=ADMIN_HEADERS)
    check(r)
    if r.status_code >= 400:
        assert state(services, kb) == before


# --- MCP tool arguments ----------------------------------------------------------------------------

ALL_TOOL_SETS = list(tool_set_names())  # every registered set, plug-ins included
tool_arguments = st.dictionaries(
    st.one_of(
        st.sampled_from(
            [
                "kb",
                "path",
                "prefix",
                "version",
                "files",
                "message",
                "query",
                "limit",
                "content",
                "id",
                "type",
                "command",
                "search",
                "offset",
                "old_string",
                "new_string",
                "tags",
                "metadata",
                "summary",
                "file_text",
                "view_range",
                "insert_line",
                "date",
                "importance",
                "taskId",
                "timeout",
                "x",
            ]
        ),
        st.text(max_size=8),
    ),
    json_values
    | st.sampled_from(["notes", "../outside", "README.md", "/memories/a.md", "0" * 40, "view", "create"]),
    max_size=5,
)


def _check_tool_result(result: Any) -> None:
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert "Traceback" not in text, text
    if result.is_error:
        # never the SDK's sanitised "Error executing tool" of an unexpected exception
        code = text.split(":", 1)[0]
        assert code in CODES | {"not_pending", "unavailable"}, text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(st.tuples(st.integers(0, 99), tool_arguments), min_size=1, max_size=6),
    who=st.sampled_from(["agent", "admin"]),
)
def test_mcp_tool_arguments(
    services: Services, kb: str, calls: list[tuple[int, dict[str, Any]]], who: str, budget: _Budget
) -> None:
    """Every tool of every tool set, as an agent and as the admin, with arguments of any shape."""
    if budget.spent():
        return
    import anyio
    from mcp import Client

    from kbserver.mcp import Binding, build_server
    from kbserver.services.access.auth import ADMIN, caller_for
    from tests.helpers import make_agent

    if services.control.agent("fuzz") is None:
        make_agent(services, "fuzz", {kb: "read_write"}, tools=ALL_TOOL_SETS)

    async def run() -> None:
        who_calls = (lambda: ADMIN) if who == "admin" else (lambda: caller_for(services, "fuzz"))
        async with Client(build_server(Binding(services, who_calls))) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert len(names) >= (5 if who == "admin" else 10)  # the agent has every tool set
            for pick, args in calls:
                _check_tool_result(await client.call_tool(names[pick % len(names)], args))

    anyio.run(run)
    git_fsck(services.repos.path(kb))  # whatever was accepted left a sound repository
