"""Browsing pages: the KB list, a KB's files with its README, one file, search."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import InvalidRequest
from kbserver.dialects.record_view import view_of
from kbserver.services import kbs
from kbserver.services.reading import files, search
from kbserver.services.reviewing import activity, review
from kbserver.web import records
from kbserver.web.glance import chart, size_text
from kbserver.web.page import call, expand, render, services_of
from kbserver.web.session import require_admin

__all__ = ["FILE_SCAN", "PER_FOLDER", "file_page", "files_page", "kb_list", "search_page"]

PER_FOLDER = 100  # files a KB page lists in each folder (a link pages through the rest)
FILE_SCAN = 100  # versions of main a file's page looks at for its history (a link looks further)


async def kb_list(request: Request) -> Response:
    who = require_admin(request)
    rows = await call(review.overview, services_of(request), who)
    return render(request, "kbs.html", kbs=rows)


@dataclass
class _Folder:
    name: str
    path: str
    folders: dict[str, _Folder] = field(default_factory=dict)
    files: list[dict[str, object]] = field(default_factory=list)


def _tree(entries: list[dict[str, object]]) -> _Folder:
    root = _Folder("", "")
    for entry in entries:
        parts = str(entry["path"]).split("/")
        node = root
        for part in parts[:-1]:
            node = node.folders.setdefault(part, _Folder(part, f"{node.path}{part}/"))
        node.files.append({**entry, "name": parts[-1]})
    return root


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def files_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    kb = await call(kbs.describe, services, who, slug)
    folder = request.query_params.get("folder", "")
    start = request.query_params.get("start", "0")
    if not start.isdigit() or len(start) > 9:
        raise InvalidRequest("start must be a number of files", start=start)
    shown = await call(files.folder_page, services, who, slug, PER_FOLDER, folder, int(start))
    entries = [{"path": f.path, "size": f.size} for f in shown.files]
    readme = None
    if any(e["path"] == "README.md" for e in entries):
        readme = (await call(files.read, services, who, slug, "README.md")).content
    named = await call(records.titles, services, slug, [str(e["path"]) for e in entries], kb.head)
    glance = await call(activity.glance, services, who, slug)
    return render(
        request,
        "files.html",
        slug=slug,
        kb=kb,
        tree=_tree(entries),
        readme=readme,
        titles=named,
        more=shown.more,
        folder=folder,
        start=int(start),
        per_folder=PER_FOLDER,
        glance=glance,
        chart=chart(glance),
        size=size_text(glance.disk_bytes),
    )


async def file_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    path = str(request.path_params["path"])
    version = request.query_params.get("version") or None
    if version:
        version = await expand(request, slug, version)
    found = await call(files.read, services, who, slug, path, version)
    head = (await call(kbs.describe, services, who, slug)).head
    history = await call(review.history, services, who, slug, path, None, None, 20, None, FILE_SCAN)
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    record = view_of(path, found.content)
    replaced: list[str] = []
    titled: dict[str, str] = {}
    if record is not None:
        own = path.rsplit("/", 1)[-1].removesuffix(".md")
        named = [f"{folder}/{s}.md" for s in record.supersedes]
        marked = await call(records.superseding, services, slug, path, own)
        replaced = list(dict.fromkeys([*named, *marked]))
        others = [*replaced, *([f"{folder}/{record.superseded_by}.md"] if record.superseded_by else [])]
        titled = await call(records.titles, services, slug, others, found.version)
    return render(
        request,
        "file.html",
        slug=slug,
        path=path,
        file=found,
        at_head=found.version == head,
        head=head,
        history=history,
        folder=folder,
        is_markdown=path.lower().endswith((".md", ".markdown")),
        record=record,
        replaced=replaced,
        named=titled,
        scanned=FILE_SCAN,
    )


async def search_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    await call(kbs.describe, services, who, slug)
    q = request.query_params.get("q", "").strip()
    found = await call(search.query, services, who, slug, q, 20) if q else None
    paths = [h.path for h in found.hits] if found else []
    named = await call(records.titles, services, slug, paths, found.version if found else None)
    return render(request, "search.html", slug=slug, q=q, found=found, titles=named)
