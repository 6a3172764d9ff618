"""Resources: `kb://{slug}/{path}[?run=RUN]` (a run's pinned snapshot) and `kb://{slug}@{version}/{path}`."""

from __future__ import annotations

import mimetypes
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import Resource

from kbserver.core.errors import InvalidRequest, KBError
from kbserver.core.model import Caller
from kbserver.mcp.errors import resource_error
from kbserver.services import Services, kbs
from kbserver.services.reading import files, runs

if TYPE_CHECKING:
    from kbserver.mcp.binding import Binding

__all__ = ["PAGE_SIZE", "mime_type", "register_resources", "resource_page", "uri"]

PAGE_SIZE = 500
"""Resources per `resources/list` page; `nextCursor` leads to the next one."""


def uri(slug: str, path: str, version: str | None = None) -> str:
    """The resource URI of a file (percent-encoded, `/` kept)."""
    at = f"@{version}" if version else ""
    return f"kb://{slug}{at}/{quote(path, safe='/')}"


def mime_type(path: str) -> str:
    """The MIME type of a file by its name (Markdown by default in KBs); a URI's query is ignored."""
    path = path.split("?", 1)[0]
    if path.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "text/plain"


_CURSOR = re.compile(r"([a-z0-9][a-z0-9-]{0,62})/([0-9]{1,12})")


def resource_page(
    services: Services,
    caller: Caller,
    mounts: dict[str, str] | None,
    run_id: str | None,
    cursor: object,
) -> tuple[list[Resource], str | None]:
    """One page of the files the caller sees as resources: the run's snapshot, else the current heads.

    Lazy: a page reads the KBs from the cursor's on, and of those only the files up to the page's
    end (`{slug}/{n}`: the n-th file of KB `slug` starts the next page). Raises InvalidRequest for a
    cursor this server did not hand out.
    """
    start_slug, skip = "", 0
    if cursor is not None:
        parsed = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
        if parsed is None:
            raise InvalidRequest("unknown cursor; start again without one", cursor=str(cursor))
        start_slug, skip = parsed[1], int(parsed[2])
    if mounts is not None:
        slugs = sorted(mounts)
    else:
        slugs = sorted(kb.slug for kb in kbs.visible(services, caller))
    page: list[Resource] = []
    for slug in (s for s in slugs if s >= start_slug):
        start = skip if slug == start_slug else 0
        version: str | None
        try:
            if run_id is not None:
                version = runs.mounted(services, caller, run_id, slug)
            else:
                version = files.visible_version(services, caller, slug)
        except KBError:  # unlinked or deleted since the run started: nothing to show
            continue
        found, more = files.entry_page(services, slug, version, start, PAGE_SIZE - len(page), caller)
        for f in found:
            name = f"{slug}/{f.path}"
            page.append(Resource(uri=uri(slug, f.path), name=name, mime_type=mime_type(f.path), size=f.size))
        if more:
            return page, f"{slug}/{start + len(found)}"
        if len(page) == PAGE_SIZE:  # full at the end of this KB: the next page starts with the next KB
            following = [s for s in slugs if s > slug]
            return page, (f"{following[0]}/0" if following else None)
    return page, None


def register_resources(server: MCPServer[Any], binding: Binding) -> None:
    """The two resource templates; the versioned one first, since `{slug}` would also match `slug@v`."""
    services = binding.services

    @server.resource(
        "kb://{slug}@{version}/{+path}",
        name="kb_file_at_version",
        title="A KB file at a version",
        description="The file `path` of KB `slug` as it was at `version` (a 40-hex version id).",
        mime_type="text/plain",
    )
    def kb_file_at_version(slug: str, version: str, path: str) -> str:
        try:
            found = files.read(services, binding.caller(), slug, path, version)
        except KBError as err:
            raise resource_error(err, uri(slug, path, version)) from None
        return found.content

    @server.resource(
        "kb://{slug}/{+path}{?run}",
        name="kb_file",
        title="A KB file in the run's snapshot",
        description=(
            "The file `path` of KB `slug` as it was when the run started: the run `?run=RUN` (from "
            "start_run), else the run of this session or stdio process; without a run, the current file."
        ),
        mime_type="text/plain",
    )
    def kb_file(slug: str, path: str, ctx: Context[Any, Any], run: str | None = None) -> str:
        try:
            caller = binding.caller()
            found_run = binding.run_of(ctx.request_context, run)
            if found_run is not None:
                found = runs.read_file(services, caller, found_run.id, slug, path)
            else:
                found = files.read(services, caller, slug, path)
        except KBError as err:
            raise resource_error(err, uri(slug, path)) from None
        return found.content

    del kb_file_at_version, kb_file  # registered on the server; not used otherwise
