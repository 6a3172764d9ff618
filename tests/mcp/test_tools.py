"""The context tools through the SDK's in-memory client: names, schemas, the write cycle, errors."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from kbserver.mcp import TOOL_NAMES
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import search
from tests.helpers import git_fsck, make_agent, state
from tests.mcp.clients import error, memory_client, ok

pytestmark = pytest.mark.anyio

EXPECTED_ARGS = {
    "list_context_files": ({"kb", "prefix", "run"}, set()),
    "read_context_file": ({"kb", "path", "version", "run"}, {"path"}),
    "list_context_versions": ({"kb", "path", "limit", "run"}, set()),
    "write_context": ({"kb", "files", "message", "idempotency_key", "run"}, {"files"}),
    "search_context": ({"kb", "query", "limit", "prefix", "run"}, {"query"}),
}
RUN_TOOLS = {
    "start_run": ({"kbs", "interactive", "label"}, set()),
    "get_proposal": ({"id"}, {"id"}),
}


async def test_tool_names_arguments_and_schemas(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "bob") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(TOOL_NAMES) | set(RUN_TOOLS) and set(TOOL_NAMES) == set(EXPECTED_ARGS)
    for name, (args, required) in {**EXPECTED_ARGS, **RUN_TOOLS}.items():
        schema = tools[name].input_schema
        assert set(schema["properties"]) == args, name
        assert set(schema.get("required", [])) == required, name
        assert tools[name].description
        output = tools[name].output_schema
        assert output is not None and output["type"] == "object"
        # The error result is published too, for clients that check structuredContent even on errors.
        assert output["properties"]["error"]["required"] == ["code", "message"]
        assert {"required": ["error"]} in output["anyOf"]
    write = tools["write_context"]
    files = write.input_schema["properties"]["files"]
    assert files["minItems"] == 1
    for word in ("create", "append", "edit", "overwrite", "delete", "expected_sha256", "256 KiB", "20 files"):
        assert word in files["description"], word
    modes = {ref["$ref"].rsplit("/", 1)[-1] for ref in files["items"]["oneOf"]}
    assert modes == {"Create", "Append", "Edit", "Overwrite", "Delete"}
    assert files["items"]["discriminator"]["propertyName"] == "mode"
    assert set(write.output_schema["properties"]) == {
        "version",
        "parent",
        "files",
        "proposal",
        "approval",
        "error",
    }  # type: ignore[index]
    assert tools["search_context"].input_schema["properties"]["limit"]["maximum"] == 100
    assert tools["read_context_file"].annotations and tools["read_context_file"].annotations.read_only_hint


async def test_read_write_stale_search_cycle(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "bob") as client:
        listing = ok(await client.call_tool("list_context_files", {}))
        assert listing["kb"] == "notes" and [f["path"] for f in listing["files"]] == ["README.md"]
        readme = ok(await client.call_tool("read_context_file", {"path": "README.md"}))
        assert readme["kb"] == "notes" and readme["version"] == listing["version"]
        assert readme["sha256"] == listing["files"][0]["sha256"] and readme["content"].startswith("# notes")

        written = ok(
            await client.call_tool(
                "write_context",
                {
                    "message": "record the espresso rule",
                    "files": [
                        {
                            "path": "README.md",
                            "mode": "append",
                            "content": "- `coffee.md` — espresso facts\n",
                            "expected_sha256": readme["sha256"],
                        },
                        {
                            "path": "coffee.md",
                            "mode": "create",
                            "content": "Espresso needs 9 bar of pressure.\n",
                        },
                    ],
                },
            )
        )
        assert written["parent"] == readme["version"] and len(written["version"]) == 40
        assert [(f["path"], f["mode"]) for f in written["files"]] == [
            ("README.md", "append"),
            ("coffee.md", "create"),
        ]

        before = state(services, "notes")
        stale = error(
            await client.call_tool(
                "write_context",
                {
                    "files": [
                        {
                            "path": "README.md",
                            "mode": "overwrite",
                            "content": "gone",
                            "expected_sha256": readme["sha256"],
                        }
                    ]
                },
            )
        )
        assert stale["code"] == "stale" and stale["path"] == "README.md"
        assert stale["expected_sha256"] == readme["sha256"] and stale["actual_sha256"] != readme["sha256"]
        assert state(services, "notes") == before

        current = ok(await client.call_tool("read_context_file", {"kb": "notes", "path": "README.md"}))
        assert current["version"] == written["version"] and "coffee.md" in current["content"]

        search.status(services, ADMIN, "notes", wait_for=written["version"], timeout=30)
        hits = ok(await client.call_tool("search_context", {"query": "espresso pressure", "limit": 5}))[
            "hits"
        ]
        assert hits and hits[0]["kb"] == "notes" and hits[0]["path"] == "coffee.md"
        assert set(hits[0]) == {"kb", "path", "score", "snippet", "highlights"}
        marked = [hits[0]["snippet"][a:b].lower() for a, b in hits[0]["highlights"]]
        assert "espresso" in marked and "**" not in hits[0]["snippet"]
        assert (
            ok(await client.call_tool("search_context", {"query": "espresso", "prefix": "nothing/"}))["hits"]
            == []
        )
    git_fsck(services.repos.path("notes"))


async def test_search_finds_its_own_write_without_waiting(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "bob") as client:
        ok(
            await client.call_tool(
                "write_context",
                {
                    "files": [
                        {"path": "tea.md", "mode": "create", "content": "Oolong is partially oxidised.\n"}
                    ]
                },
            )
        )
        hits = ok(await client.call_tool("search_context", {"query": "oolong"}))["hits"]
    assert [h["path"] for h in hits] == ["tea.md"]


WRITE_ERRORS: list[tuple[str, list[dict[str, Any]], str]] = [
    ("create existing", [{"path": "README.md", "mode": "create", "content": "x"}], "already_exists"),
    ("stale", [{"path": "README.md", "mode": "delete", "expected_sha256": "0" * 64}], "stale"),
    (
        "no match",
        [{"path": "README.md", "mode": "edit", "old_string": "no such text", "new_string": "y"}],
        "no_match",
    ),
    (
        "ambiguous",
        [{"path": "twice.md", "mode": "edit", "old_string": "ab", "new_string": "y"}],
        "ambiguous_match",
    ),
    (
        "too large file",
        [{"path": "big.md", "mode": "create", "content": "x" * (256 * 1024 + 1)}],
        "too_large",
    ),
    (
        "too many files",
        [{"path": f"f{i}.md", "mode": "create", "content": "x"} for i in range(21)],
        "too_large",
    ),
    (
        "secret",
        [{"path": "k.md", "mode": "create", "content": "aws key AKIAIOSFODNN7EXAMPLF here"}],
        "secret_detected",
    ),
    ("missing file", [{"path": "nope.md", "mode": "append", "content": "x"}], "not_found"),
    ("unknown mode", [{"path": "a.md", "mode": "rename", "content": "x"}], "invalid_request"),
    ("unknown field", [{"path": "a.md", "mode": "create", "content": "x", "extra": 1}], "invalid_request"),
    ("missing content", [{"path": "a.md", "mode": "create"}], "invalid_request"),
    (
        "bad sha format",
        [{"path": "README.md", "mode": "delete", "expected_sha256": "ABC"}],
        "invalid_request",
    ),
    (
        "duplicate path",
        [
            {"path": "a.md", "mode": "create", "content": "x"},
            {"path": "a.md", "mode": "create", "content": "y"},
        ],
        "invalid_request",
    ),
    ("dotdot", [{"path": "a/../b.md", "mode": "create", "content": "x"}], "invalid_request"),
    ("no files", [], "invalid_request"),
]


@pytest.mark.parametrize(("name", "files", "code"), WRITE_ERRORS, ids=[c[0] for c in WRITE_ERRORS])
async def test_write_errors_are_tool_errors(
    services: Services, agent: dict[str, str], name: str, files: list[dict[str, Any]], code: str
) -> None:
    async with memory_client(services, "bob") as client:
        ok(
            await client.call_tool(
                "write_context", {"files": [{"path": "twice.md", "mode": "create", "content": "ab ab"}]}
            )
        )
        before = state(services, "notes")
        err = error(await client.call_tool("write_context", {"files": files}))
    assert err["code"] == code, err
    assert state(services, "notes") == before
    if code == "secret_detected":
        assert err["path"] == "k.md" and err["rule"]


async def test_argument_errors_are_invalid_request(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "bob") as client:
        for name, args in [
            ("read_context_file", {}),
            ("read_context_file", {"path": 5}),
            ("read_context_file", {"path": "../etc/passwd"}),
            ("search_context", {"query": "x", "limit": 0}),
            ("search_context", {"query": "x", "limit": 101}),
            ("search_context", {"query": ""}),
            ("write_context", {"files": "x"}),
            ("list_context_files", {"kb": "Bad Slug!"}),
        ]:
            err = error(await client.call_tool(name, args))
            assert err["code"] in ("invalid_request", "not_found"), (name, args, err)
            if name != "list_context_files":
                assert err["code"] == "invalid_request", (name, args, err)
        missing = error(await client.call_tool("read_context_file", {"path": "nope.md"}))
        assert missing["code"] == "not_found" and missing["path"] == "nope.md"


async def test_validation_errors_in_words(services: Services, kb: str, agent: dict[str, str]) -> None:
    before = state(services, kb)
    async with memory_client(services, "bob") as client:
        bad = {"files": [{"path": "a.md", "mode": "apend", "content": "x"}]}
        err = error(await client.call_tool("write_context", bad))
        assert err["code"] == "invalid_request"
        assert (
            "files[0].mode: 'apend' is not a mode; use create, append, edit, overwrite or delete"
            in err["message"]
        )
        sha = {"path": "a.md", "mode": "edit", "old_string": "x", "new_string": "y", "expected_sha256": "zz"}
        err = error(await client.call_tool("write_context", {"files": [sha]}))
        assert "files[0].expected_sha256: must be a sha256: 64 lowercase hex digits" in err["message"]
        for text in (err["message"], *err["errors"]):
            assert "pattern" not in text and "Input tag" not in text and "discriminator" not in text
    assert state(services, kb) == before


async def test_permissions(services: Services, agent: dict[str, str]) -> None:
    kbs.create(services, ADMIN, "secret-kb", "Not for bob")
    kbs.create(services, ADMIN, "shared", "Read only for carol")
    make_agent(services, "carol", {"shared": "read"})
    async with memory_client(services, "bob") as bob:
        for name, args in [
            ("read_context_file", {"kb": "secret-kb", "path": "README.md"}),
            ("list_context_files", {"kb": "secret-kb"}),
            ("search_context", {"kb": "secret-kb", "query": "x"}),
            (
                "write_context",
                {"kb": "secret-kb", "files": [{"path": "a.md", "mode": "create", "content": "x"}]},
            ),
            ("list_context_files", {"kb": "no-such-kb"}),
        ]:
            assert error(await bob.call_tool(name, args))["code"] == "not_found", name
    async with memory_client(services, "carol") as carol:
        assert ok(await carol.call_tool("read_context_file", {"path": "README.md"}))["kb"] == "shared"
        denied = error(
            await carol.call_tool(
                "write_context", {"files": [{"path": "a.md", "mode": "create", "content": "x"}]}
            )
        )
        assert denied["code"] == "forbidden"


async def test_kb_may_be_omitted_only_with_one_kb(services: Services, agent: dict[str, str]) -> None:
    kbs.create(services, ADMIN, "second", "")
    make_agent(services, "dave", {"notes": "read", "second": "read_write"})
    make_agent(services, "erin", {})
    async with memory_client(services, "dave") as dave:
        err = error(await dave.call_tool("list_context_files", {}))
        assert err["code"] == "invalid_request" and err["kbs"] == ["notes", "second"]
        assert "notes" in err["message"] and "second" in err["message"]
        assert ok(await dave.call_tool("list_context_files", {"kb": "second"}))["kb"] == "second"
    async with memory_client(services, "erin") as erin:
        assert (
            error(await erin.call_tool("read_context_file", {"path": "README.md"}))["code"]
            == "invalid_request"
        )


async def test_read_write_ask(services: Services, kb: str) -> None:
    make_agent(services, "asker", {kb: "read_write_ask"})
    change = {"files": [{"path": "idea.md", "mode": "create", "content": "an idea\n"}]}
    before = state(services, kb)
    # Sessionless (2026-07-28) calls belong to no run, so there is no one to ask.
    async with memory_client(services, "asker") as client:
        err = error(await client.call_tool("write_context", change))
        assert err["code"] == "approval_unavailable" and "start_run" in err["message"]
    # A session (the initialize handshake) is an interactive run: the write becomes a proposal.
    async with memory_client(services, "asker", mode="legacy") as client:
        proposal = ok(await client.call_tool("write_context", change))
    assert proposal["proposal"] == {"id": proposal["proposal"]["id"], "status": "pending"}
    assert proposal["approval"]["status"] == "pending" and proposal["approval"]["kb"] == kb
    assert state(services, kb) == before


async def test_instructions_depend_on_the_caller(services: Services, agent: dict[str, str]) -> None:
    kbs.create(services, ADMIN, "journal", "Daily journal")
    make_agent(services, "rec", {"journal": "read_write"}, auto_record=True)
    for mode in ("auto", "legacy"):
        async with memory_client(services, "bob", mode=mode) as client:
            text = client.instructions
        assert text is not None
        for rule in (
            "only storage that outlives",
            "README.md first",
            "expected_sha256",
            "one write_context call",
            "Never write secrets, credentials, tokens or raw transcripts",
            "written by other agents",
            "list_context_versions",
        ):
            assert rule in text, (mode, rule)
        assert "- notes (read_write): Team notes" in text and "journal" not in text
        assert "Learning policy" not in text
        assert ("This session is run run_" in text) == (mode == "legacy")
    async with memory_client(services, "rec") as client:
        text = client.instructions
    assert text is not None and "- journal (read_write): Daily journal" in text and "notes" not in text
    for rule in (
        "Learning policy",
        "Edit existing content rather than adding files",
        "index",
        "never instructions to other agents",
        "in your own words",
        "Never claim to have remembered",
        "unattended run",
    ):
        assert rule in text, rule


async def test_unknown_agent(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "nobody") as client:
        listing = await client.call_tool("list_context_files", {})
    assert error(listing)["code"] == "not_found"


async def test_client_type_is_the_sdk_client(services: Services, agent: dict[str, str]) -> None:
    async with memory_client(services, "bob", mode="legacy") as client:
        assert isinstance(client, Client)
        assert client.server_info is not None and client.server_info.name == "kbserver"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_list_in_pages(
    services: Services, agent: dict[str, str], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr("kbserver.mcp.resources.PAGE_SIZE", 2)
    files = [{"path": f"p/{i}.md", "mode": "create", "content": f"{i}\n"} for i in range(4)]
    async with memory_client(services, "bob", mode=mode) as client:
        ok(await client.call_tool("write_context", {"files": files}))
        uris: list[str] = []
        cursor: str | None = None
        while True:
            page = await client.list_resources(cursor=cursor)
            assert len(page.resources) <= 2
            uris += [str(r.uri) for r in page.resources]
            cursor = page.next_cursor
            if cursor is None:
                break
        with pytest.raises(MCPError) as bad:
            await client.list_resources(cursor="not-a-cursor")
    assert bad.value.error.message.startswith("invalid_request: ")
    # A legacy session is a run pinned before the write; without a session the list is the current head.
    expected = ["kb://notes/README.md"] if mode == "legacy" else []
    if mode == "auto":
        expected = ["kb://notes/README.md", *(f"kb://notes/p/{i}.md" for i in range(4))]
    assert uris == expected


async def test_results_and_errors_match_the_published_output_schemas(
    services: Services, agent: dict[str, str]
) -> None:
    """TypeScript clients (and the Inspector) check structuredContent against outputSchema, errors too."""
    import jsonschema

    async with memory_client(services, "bob") as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        readme = ok(await client.call_tool("read_context_file", {"path": "README.md"}))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("list_context_files", {}),
            ("read_context_file", {"path": "README.md"}),
            ("read_context_file", {"path": "missing.md"}),
            ("search_context", {"query": "rules"}),
            ("search_context", {"query": "x", "limit": 0}),
            ("write_context", {"files": [{"path": "n.md", "mode": "create", "content": "n\n"}]}),
            (
                "write_context",
                {"files": [{"path": "README.md", "mode": "delete", "expected_sha256": "0" * 64}]},
            ),
            (
                "write_context",
                {
                    "files": [
                        {
                            "path": "README.md",
                            "mode": "append",
                            "content": "x\n",
                            "expected_sha256": readme["sha256"],
                        }
                    ]
                },
            ),
        ]
        for name, args in calls:
            result = await client.call_tool(name, args)
            assert result.structured_content is not None
            jsonschema.validate(result.structured_content, schemas[name])  # type: ignore[arg-type]
