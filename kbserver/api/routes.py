"""The /api/v1 routes: one small handler per endpoint, described once for routing and OpenAPI."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kbserver.api import schemas as s
from kbserver.api.http import body, call, caller, optional_body, query, respond, services_of
from kbserver.core.inputs import check_input
from kbserver.services import kbs
from kbserver.services import models as m
from kbserver.services.access import agents
from kbserver.services.reading import files, runs, search
from kbserver.services.reviewing import review, versions
from kbserver.services.writing import idempotency, proposals, writes

__all__ = ["ENDPOINTS", "Endpoint", "api_routes"]

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    response: type[BaseModel] | None  # None: not JSON (see media_type)
    status: int = 200
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    admin: bool = False
    extra: dict[int, type[BaseModel]] | None = None
    media_type: str = "application/json"


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def list_kbs(request: Request) -> Response:
    who = await caller(request)
    return respond(s.KBList(await call(kbs.visible, services_of(request), who)))


async def create_kb(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.KBCreate)
    return respond(await call(kbs.create, services_of(request), who, req.slug, req.description), 201)


async def get_kb(request: Request) -> Response:
    who = await caller(request)
    return respond(await call(kbs.describe, services_of(request), who, _slug(request)))


async def list_files(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.FilesQuery)
    return respond(await call(files.listing, services_of(request), who, _slug(request), q.prefix, q.version))


async def read_file(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.ReadQuery)
    path = request.path_params["path"]
    return respond(await call(files.read, services_of(request), who, _slug(request), path, q.version))


async def write(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.WriteRequest)
    key = idempotency.header_key(request.headers.getlist("idempotency-key"))
    result = await call(writes.submit, services_of(request), who, _slug(request), req, idempotency_key=key)
    return respond(result, 202 if isinstance(result, m.ProposalAccepted) else 200)


async def archive(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.ReadQuery)
    slug = _slug(request)
    version, chunks = await call(files.archive, services_of(request), who, slug, q.version)
    name = f"{slug}-{(version or 'empty')[:12]}.tar.gz"
    return StreamingResponse(  # built file by file in the thread pool, never whole in memory
        chunks,
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{name}"', "X-KB-Version": version or ""},
    )


async def list_versions(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.VersionsQuery)
    out = await call(versions.listing, services_of(request), who, _slug(request), q.path, q.limit, q.cursor)
    return respond(out)


async def get_version(request: Request) -> Response:
    who = await caller(request)
    version = request.path_params["version"]
    return respond(await call(versions.get, services_of(request), who, _slug(request), version))


async def revert(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.RevertIn)
    out = await call(versions.revert, services_of(request), who, _slug(request), req.version, req.message)
    return respond(out)


async def undo(request: Request) -> Response:
    who = await caller(request)
    req = await optional_body(request, s.UndoIn)
    version = request.path_params["version"]
    return respond(await call(review.undo, services_of(request), who, _slug(request), version, req.message))


async def review_status(request: Request) -> Response:
    who = await caller(request)
    query(request, s.NoQuery)
    return respond(await call(review.status, services_of(request), who, _slug(request)))


async def mark_reviewed(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.ReviewIn)
    return respond(await call(review.mark, services_of(request), who, _slug(request), req.version))


async def search_kb(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.SearchQuery)
    if q.wait_for is not None:  # read your own writes: the answer's `version` says what was searched
        await search.wait_indexed(services_of(request), who, _slug(request), q.wait_for, q.timeout)
    out = await call(
        search.query, services_of(request), who, _slug(request), q.q, q.limit, q.offset, q.prefix
    )
    return respond(out)


async def index_status(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.IndexQuery)
    out = await search.status_after(services_of(request), who, _slug(request), q.wait_for, q.timeout)
    return respond(out)


async def list_proposals(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.ProposalsQuery)
    return respond(await call(proposals.listing, services_of(request), who, _slug(request), q.status))


async def get_proposal(request: Request) -> Response:
    who = await caller(request)
    pid = request.path_params["proposal"]
    return respond(await call(proposals.get, services_of(request), who, _slug(request), pid))


async def approve(request: Request) -> Response:
    who = await caller(request)
    pid = request.path_params["proposal"]
    return respond(await call(proposals.approve, services_of(request), who, _slug(request), pid))


async def reject(request: Request) -> Response:
    who = await caller(request)
    req = await optional_body(request, s.RejectIn)
    pid = request.path_params["proposal"]
    return respond(await call(proposals.reject, services_of(request), who, _slug(request), pid, req.reason))


async def start_run(request: Request) -> Response:
    who = await caller(request)
    req = await optional_body(request, s.RunIn)
    return respond(
        await call(runs.start, services_of(request), who, req.kbs, req.interactive, req.label), 201
    )


async def get_run(request: Request) -> Response:
    who = await caller(request)
    query(request, s.NoQuery)
    return respond(await call(runs.get, services_of(request), who, request.path_params["run"]))


async def end_run(request: Request) -> Response:
    who = await caller(request)
    await optional_body(request, s.RunEndIn)
    return respond(await call(runs.end, services_of(request), who, request.path_params["run"]))


async def run_files(request: Request) -> Response:
    who = await caller(request)
    q = query(request, s.RunFilesQuery)
    p = request.path_params
    return respond(await call(runs.list_files, services_of(request), who, p["run"], p["slug"], q.prefix))


async def run_file(request: Request) -> Response:
    who = await caller(request)
    query(request, s.NoQuery)
    p = request.path_params
    return respond(await call(runs.read_file, services_of(request), who, p["run"], p["slug"], p["path"]))


async def list_agents(request: Request) -> Response:
    who = await caller(request)
    return respond(await call(agents.listing, services_of(request), who))


async def create_agent(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.AgentCreate)
    tools = [str(t) for t in req.tools]
    agent, token = await call(
        agents.create, services_of(request), who, req.name, req.parent, tools, req.auto_record
    )
    return respond(s.AgentWithToken(**agent.model_dump(), token=token), 201)


async def get_agent(request: Request) -> Response:
    who = await caller(request)
    return respond(await call(agents.get, services_of(request), who, request.path_params["name"]))


async def delete_agent(request: Request) -> Response:
    who = await caller(request)
    return respond(await call(agents.delete, services_of(request), who, request.path_params["name"]))


async def rotate_token(request: Request) -> Response:
    who = await caller(request)
    agent, token = await call(agents.rotate, services_of(request), who, request.path_params["name"])
    return respond(s.AgentWithToken(**agent.model_dump(), token=token))


async def list_links(request: Request) -> Response:
    who = await caller(request)
    agent = await call(agents.get, services_of(request), who, request.path_params["name"])
    return respond(s.Links(links=agent.links))


async def add_link(request: Request) -> Response:
    who = await caller(request)
    req = await body(request, s.LinkIn)
    name = request.path_params["name"]
    return respond(await call(agents.link, services_of(request), who, name, req.kb, req.permission))


async def delete_link(request: Request) -> Response:
    who = await caller(request)
    p = request.path_params
    return respond(await call(agents.unlink, services_of(request), who, p["name"], p["slug"]))


KB = "/kbs/{slug}"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/kbs", list_kbs, "KBs visible to the caller", s.KBList),
    Endpoint("POST", "/kbs", create_kb, "Create a KB", m.KBInfo, 201, body=s.KBCreate, admin=True),
    Endpoint("GET", KB, get_kb, "Describe a KB", m.KBInfo),
    Endpoint(
        "GET", KB + "/files", list_files, "Files at a version, sorted by path", m.FileList, query=s.FilesQuery
    ),
    Endpoint("GET", KB + "/files/{path:path}", read_file, "Read a file", m.FileContent, query=s.ReadQuery),
    Endpoint(
        "POST",
        KB + "/write",
        write,
        "Write files as one version",
        m.WriteResult,
        body=s.WriteRequest,
        extra={202: m.ProposalAccepted},
    ),
    Endpoint(
        "GET",
        KB + "/archive",
        archive,
        "A tar.gz of the files at a version",
        None,
        query=s.ReadQuery,
        media_type="application/gzip",
    ),
    Endpoint(
        "GET", KB + "/versions", list_versions, "Versions, newest first", m.VersionPage, query=s.VersionsQuery
    ),
    Endpoint("GET", KB + "/versions/{version}", get_version, "One version with its diff", m.VersionDetail),
    Endpoint("POST", KB + "/revert", revert, "Revert the files to a version", m.WriteResult, body=s.RevertIn),
    Endpoint(
        "POST",
        KB + "/versions/{version}/undo",
        undo,
        "Undo one version: put back the files it changed as they were before it",
        m.WriteResult,
        body=s.UndoIn,
    ),
    Endpoint(
        "GET",
        KB + "/review",
        review_status,
        "Agent writes since the review marker",
        m.ReviewStatus,
        admin=True,
    ),
    Endpoint(
        "POST",
        KB + "/review",
        mark_reviewed,
        'Move the "reviewed up to" marker',
        m.ReviewStatus,
        body=s.ReviewIn,
        admin=True,
    ),
    Endpoint("GET", KB + "/search", search_kb, "Full-text search", m.SearchResults, query=s.SearchQuery),
    Endpoint(
        "GET",
        KB + "/index",
        index_status,
        "Index status; waits for a version",
        m.IndexStatus,
        query=s.IndexQuery,
    ),
    Endpoint(
        "GET",
        KB + "/proposals",
        list_proposals,
        "Proposals of the KB",
        m.ProposalList,
        query=s.ProposalsQuery,
    ),
    Endpoint("GET", KB + "/proposals/{proposal}", get_proposal, "One proposal", m.Proposal),
    Endpoint(
        "POST", KB + "/proposals/{proposal}/approve", approve, "Approve a proposal", m.Approval, admin=True
    ),
    Endpoint(
        "POST",
        KB + "/proposals/{proposal}/reject",
        reject,
        "Reject a proposal",
        m.Rejection,
        body=s.RejectIn,
        admin=True,
    ),
    Endpoint("POST", "/runs", start_run, "Start a run (pins a snapshot)", m.RunStarted, 201, body=s.RunIn),
    Endpoint("GET", "/runs/{run}", get_run, "One of your live runs: what it pinned", m.RunStarted),
    Endpoint(
        "POST",
        "/runs/{run}/end",
        end_run,
        "End a run now (its reads are not_found)",
        m.RunEnded,
        body=s.RunEndIn,
    ),
    Endpoint(
        "GET",
        "/runs/{run}/kbs/{slug}/files",
        run_files,
        "Files at the run's snapshot",
        m.FileList,
        query=s.RunFilesQuery,
    ),
    Endpoint(
        "GET",
        "/runs/{run}/kbs/{slug}/files/{path:path}",
        run_file,
        "A file at the run's snapshot",
        m.FileContent,
    ),
    Endpoint("GET", "/agents", list_agents, "Agents", m.AgentList, admin=True),
    Endpoint(
        "POST",
        "/agents",
        create_agent,
        "Create an agent (its token is shown once)",
        s.AgentWithToken,
        201,
        body=s.AgentCreate,
        admin=True,
    ),
    Endpoint("GET", "/agents/{name}", get_agent, "One agent", m.Agent, admin=True),
    Endpoint("DELETE", "/agents/{name}", delete_agent, "Delete an agent", m.AgentDeleted, admin=True),
    Endpoint(
        "POST", "/agents/{name}/token", rotate_token, "Replace an agent's token", s.AgentWithToken, admin=True
    ),
    Endpoint("GET", "/agents/{name}/links", list_links, "An agent's links", s.Links, admin=True),
    Endpoint(
        "POST",
        "/agents/{name}/links",
        add_link,
        "Link an agent to a KB",
        m.Agent,
        body=s.LinkIn,
        admin=True,
    ),
    Endpoint("DELETE", "/agents/{name}/links/{slug}", delete_link, "Remove a link", m.Agent, admin=True),
)


def _by_method(handlers: dict[str, Handler]) -> Handler:
    async def dispatch(request: Request) -> Response:
        check_input(dict(request.path_params))  # run ids, proposal ids, names: before any store
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return dispatch


def api_routes() -> list[Route]:
    """Starlette routes of every endpoint (mounted under /api/v1): one route per path with all of
    its methods, so that a wrong method gets 405 with an `Allow` header naming every right one."""
    by_path: dict[str, dict[str, Handler]] = {}
    for e in ENDPOINTS:
        by_path.setdefault(e.path, {})[e.method] = e.handler
    return [Route(path, _by_method(handlers), methods=list(handlers)) for path, handlers in by_path.items()]
