"""Memories in the admin's pages: titles next to paths, and a record's changed fields and words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from markupsafe import Markup

from kbserver.core.errors import KBError
from kbserver.dialects.record_view import is_dialect_path, title_of, view_of
from kbserver.services import files, search
from kbserver.services.activity import WeekFile
from kbserver.services.auth import ADMIN
from kbserver.services.context import Services
from kbserver.web.markup import word_diff

__all__ = ["MAX_TITLES", "RecordDiff", "Superseded", "record_diffs", "superseded", "superseding", "titles"]

MAX_TITLES = 300  # memory files whose title one page reads, at most


def _text(services: Services, slug: str, path: str, version: str | None) -> str | None:
    try:
        return files.read(services, ADMIN, slug, path, version).content
    except KBError:  # deleted, not there yet, or not UTF-8: no title, no record
        return None


def titles(services: Services, slug: str, paths: Iterable[str], version: str | None = None) -> dict[str, str]:
    """The title or first line of each memory file among `paths` (at most MAX_TITLES of them)."""
    out: dict[str, str] = {}
    wanted = [p for p in dict.fromkeys(paths) if is_dialect_path(p)][:MAX_TITLES]
    for path in wanted:
        text = _text(services, slug, path, version)
        title = title_of(path, text) if text is not None else None
        if title:
            out[path] = title
    return out


@dataclass
class RecordDiff:
    """A memory's change as a person reads it: each changed field before and after, and the text's words."""

    fields: list[tuple[str, str, str]]  # (field, before, after); "" when absent
    old: Markup
    new: Markup
    text_changed: bool


def record_diffs(
    services: Services, slug: str, paths: Iterable[str], before: str | None, after: str
) -> dict[str, RecordDiff]:
    """For each memory file among `paths`, its change from version `before` to `after`."""
    out: dict[str, RecordDiff] = {}
    for path in [p for p in paths if is_dialect_path(p)][:50]:
        old_text = _text(services, slug, path, before) if before else None
        new_text = _text(services, slug, path, after)
        old = view_of(path, old_text) if old_text is not None else None
        new = view_of(path, new_text) if new_text is not None else None
        if old is None and new is None:
            continue
        a, b = (old.fields if old else {}), (new.fields if new else {})
        changed = [(k, a.get(k, ""), b.get(k, "")) for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        old_words, new_words = word_diff(old.text if old else "", new.text if new else "")
        out[path] = RecordDiff(
            changed, old_words, new_words, (old.text if old else "") != (new.text if new else "")
        )
    return out


@dataclass(frozen=True)
class Superseded:
    """A memory that a newer one replaced within the week, and the version that marked it."""

    path: str
    by: str  # the id of the memory that supersedes it
    by_path: str
    version: str
    authors: list[str]


def superseded(
    services: Services, slug: str, changed: Iterable[WeekFile], base: str | None, head: str | None
) -> list[Superseded]:
    """The memory files among `changed` that are superseded at `head` and were not at `base` (only
    files some version rewrote can have become so; at most MAX_TITLES of them are read)."""
    out: list[Superseded] = []
    wanted = [f for f in changed if f.rewritten and f.change != "deleted" and is_dialect_path(f.path)]
    for f in wanted[:MAX_TITLES]:
        now_text = _text(services, slug, f.path, head)
        now = view_of(f.path, now_text) if now_text is not None else None
        if now is None or not now.superseded_by:
            continue
        then_text = _text(services, slug, f.path, base) if base and f.change == "modified" else None
        then = view_of(f.path, then_text) if then_text is not None else None
        if then is not None and then.superseded_by == now.superseded_by:
            continue
        folder = f.path.rsplit("/", 1)[0]
        out.append(
            Superseded(f.path, now.superseded_by, f"{folder}/{now.superseded_by}.md", f.version, f.authors)
        )
    return out


def superseding(services: Services, slug: str, path: str, memory_id: str | None) -> list[str]:
    """The paths of the memories (in `path`'s folder) that the memory `memory_id` superseded, as far
    as the search index has followed main (their `superseded_by` names it)."""
    if not memory_id or not is_dialect_path(path) or "/" not in path:
        return []
    folder = path.rsplit("/", 1)[0] + "/"
    try:
        found = search.query(
            services, ADMIN, slug, "", 50, prefix=folder, filters={"superseded_by": memory_id}, snippets=False
        )
    except KBError:  # the index is damaged or the id is no filterable value: no links, the page stands
        return []
    return sorted(h.path for h in found.hits if h.path != path)
