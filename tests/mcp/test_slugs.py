"""Read paths validate the slug: `kb="../outside"` never opens a repository outside the KB folder."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from kbserver.core.errors import NotFound
from kbserver.mcp import Binding, build_server
from kbserver.services import Services, kbs
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files, search
from kbserver.services.reviewing import versions
from tests.mcp.clients import error

pytestmark = pytest.mark.anyio

BAD_SLUGS = ["../outside", "../kbs/notes", "notes/../../outside", "..", "/etc", "NOTES", "notes\n"]


@pytest.fixture
def outside(services: Services, kb: str) -> str:
    """A real repository just outside the KB folder: data/outside.git, a copy of a KB."""
    shutil.copytree(services.repos.path(kb), services.data / "outside.git")
    return "outside"


@pytest.mark.parametrize("slug", BAD_SLUGS)
async def test_admin_tools_never_open_a_path_outside(services: Services, outside: str, slug: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_context_file", {"kb": slug, "path": "README.md"}),
        ("list_context_files", {"kb": slug}),
        ("search_context", {"kb": slug, "query": "knowledge"}),
        ("write_context", {"kb": slug, "files": [{"path": "x.md", "mode": "create", "content": "x"}]}),
    ]
    before = sorted(p.name for p in (services.data / "outside.git").rglob("*"))
    async with Client(build_server(Binding(services, lambda: ADMIN))) as client:
        for tool, args in calls:
            err = error(await client.call_tool(tool, args))
            assert err["code"] in ("not_found", "invalid_request"), (tool, err)
        with pytest.raises(MCPError):
            await client.read_resource(f"kb://{slug}/README.md")
    assert sorted(p.name for p in (services.data / "outside.git").rglob("*")) == before


@pytest.mark.parametrize("slug", BAD_SLUGS)
def test_services_refuse_a_slug_that_is_not_one(services: Services, outside: str, slug: str) -> None:
    for call in (
        lambda: files.read(services, ADMIN, slug, "README.md"),
        lambda: files.listing(services, ADMIN, slug),
        lambda: versions.listing(services, ADMIN, slug),
        lambda: search.query(services, ADMIN, slug, "knowledge"),
        lambda: kbs.describe(services, ADMIN, slug),
    ):
        with pytest.raises(NotFound):
            call()
    assert not services.repos.exists(slug)
