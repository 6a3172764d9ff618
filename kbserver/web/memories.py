"""A KB's memories page: every memory as its sentence, by who may read it and by type, searchable,
the superseded ones marked with the text that replaced them."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from kbserver.dialects.record_view import RecordView, is_dialect_path, title_of, view_of
from kbserver.services import kbs
from kbserver.services.context import Services
from kbserver.services.reading import files
from kbserver.web.page import call, render, services_of
from kbserver.web.session import require_admin

__all__ = ["MAX_READ", "MAX_SHOWN", "Memory", "memories_page"]

MAX_READ = 5000  # memory files one page reads, at most
MAX_SHOWN = 500  # memories one page lists, at most


@dataclass
class Memory:
    path: str
    record: RecordView
    superseded_by: str | None = None  # the text of the memory that replaced it


@dataclass
class Shelf:
    """The memories of one scope, by type."""

    scope: str
    types: dict[str, list[Memory]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(m) for m in self.types.values())


@dataclass
class Listing:
    shelves: list[Shelf]
    shown: int
    matching: int
    read: int
    capped: bool  # more memory files than MAX_READ


def _listing(services: Services, slug: str, q: str, version: str | None) -> Listing:
    found: dict[str, RecordView] = {}
    capped = False
    if version is not None:
        for path, _sha, text in files.texts_at(services, slug, version):
            if text is None or not is_dialect_path(path) or path.startswith("memory-tool/"):
                continue
            if len(found) == MAX_READ:
                capped = True
                break
            record = view_of(path, text)
            if record is not None and record.text.strip():
                found[path] = record
    needle = q.casefold()
    matching = [p for p, r in found.items() if not needle or needle in r.text.casefold()]
    shelves: dict[str, Shelf] = {}
    for path in matching[:MAX_SHOWN]:
        record = found[path]
        by = None
        if record.superseded_by:
            folder = path.rsplit("/", 1)[0]
            other = found.get(f"{folder}/{record.superseded_by}.md")
            by = (title_of(path, other.text) if other else None) or "a memory no longer here"
        shelf = shelves.setdefault(record.scope_words, Shelf(record.scope_words))
        shelf.types.setdefault(record.type or "no type", []).append(Memory(path, record, by))
    ordered = sorted(shelves.values(), key=lambda s: (not s.scope.startswith("shared"), s.scope))
    return Listing(ordered, min(len(matching), MAX_SHOWN), len(matching), len(found), capped)


async def memories_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = str(request.path_params["slug"]), services_of(request)
    head = (await call(kbs.describe, services, who, slug)).head
    q = request.query_params.get("q", "").strip()
    listing = await call(_listing, services, slug, q, head)
    return render(request, "memories.html", slug=slug, q=q, listing=listing, max_read=MAX_READ)
