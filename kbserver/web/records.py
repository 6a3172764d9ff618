"""Memories in the admin's pages: titles next to paths, and a record's changed fields and words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from markupsafe import Markup

from kbserver.core.errors import KBError
from kbserver.dialects.record_view import RecordView, field_words, is_dialect_path, title_of, view_of
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Services
from kbserver.services.reading import files, search
from kbserver.services.reviewing.activity import WeekFile
from kbserver.web.markup import when, word_diff

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
    """A memory's change as a person reads it: sentences for what changed besides its text ("type
    changed from fact to preference", "now superseded by «…»"), and the text's changed words."""

    changes: list[Markup]
    old: Markup
    new: Markup
    text_changed: bool
    created: Markup | None = None  # a new memory in a sentence (who may read it, type, date)


_DATES = {"createdAt", "created", "updatedAt", "updated", "created_at", "updated_at", "expires"}
_QUIET = {"id", "memory_id"}  # the file name says it already


def _value(key: str, value: str) -> str:
    return when(value) if key in _DATES else value


def _quoted(services: Services, slug: str, path: str, memory_id: str, version: str) -> Markup:
    """«the text» of the memory `memory_id` beside `path` at `version` (its id when it cannot be read)."""
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    other = f"{folder}/{memory_id}.md" if folder else f"{memory_id}.md"
    text = _text(services, slug, other, version)
    title = title_of(other, text) if text is not None else None
    return Markup("«{}»").format(title) if title else Markup("a memory not found ({})").format(memory_id)


def _sentences(
    services: Services, slug: str, path: str, a: dict[str, str], b: dict[str, str], version: str
) -> list[Markup]:
    out: list[Markup] = []
    for key in dict.fromkeys([*a, *b]):
        before, after = a.get(key), b.get(key)
        if before == after or key in _QUIET:
            continue
        name = field_words(key)
        if key == "superseded_by":
            if after:
                out.append(
                    Markup("now superseded by {}").format(_quoted(services, slug, path, after, version))
                )
            else:
                out.append(Markup("no longer superseded"))
        elif key == "supersedes" and after:
            said = [_quoted(services, slug, path, m.strip(), version) for m in after.split(",")]
            out.append(Markup("now supersedes {}").format(Markup(", ").join(said)))
        elif key == "agentId" and path.startswith("memories/"):
            out.append(Markup("now private to agent {}").format(after) if after else Markup("now shared"))
        elif before is None:
            out.append(Markup("{} set to {}").format(name, _value(key, str(after))))
        elif after is None:
            out.append(Markup("{} removed (it was {})").format(name, _value(key, before)))
        else:
            out.append(
                Markup("{} changed from {} to {}").format(name, _value(key, before), _value(key, after))
            )
    return out


def _created(new: RecordView) -> Markup:
    parts = [f"a new memory, {new.scope_words}"]
    if new.type:
        parts.append(f"type {new.type}")
    if new.created:
        parts.append(f"created {when(new.created)}")
    return Markup("{}").format(", ".join(parts))


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
        changed = _sentences(services, slug, path, a, b, after) if old and new else []
        if old is not None and new is None:
            changed = [Markup("memory deleted (it was {})").format(old.scope_words)]
        old_words, new_words = word_diff(old.text if old else "", new.text if new else "")
        out[path] = RecordDiff(
            changed,
            old_words,
            new_words,
            (old.text if old else "") != (new.text if new else ""),
            _created(new) if new is not None and old is None else None,
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
