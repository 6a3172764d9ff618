"""Use cases of KBs: create, list, describe, import a folder."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from kbserver.changes import Tree, apply, refuse_secrets
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest
from kbserver.core.messages import check_description
from kbserver.core.model import (
    SLUG_PATTERN,
    Caller,
    Create,
    Delete,
    FileChange,
    Overwrite,
    WriteRequest,
    WriteResult,
)
from kbserver.core.paths import check_path
from kbserver.services.access.auth import permission, require_read
from kbserver.services.context import Services
from kbserver.services.following.indexing import INDEX_SINK
from kbserver.services.models import ImportResult, KBInfo, KBSummary
from kbserver.services.reading.privacy import check_clone
from kbserver.services.writing import writes

__all__ = [
    "ImportResult",
    "create",
    "describe",
    "import_folder",
    "repository",
    "set_limits",
    "slugs",
    "visible",
]

_SLUG = re.compile(SLUG_PATTERN)
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules"}

_README = """# {slug}

{description}

## Rules for agents
- This KB is the only storage that outlives your run. Read this README first and follow it.
- Read a file before changing it and pass its `expected_sha256`, so you never overwrite someone else's change.
- Put one complete update in one write; add new files to the index below in the same write.
- Write facts and practices in your own words. Never write secrets, credentials, tokens or raw transcripts.

## Index
- `README.md` — this file: purpose, rules and index.
"""


def _check_slug(slug: str) -> None:
    if not isinstance(slug, str) or not _SLUG.match(slug):
        raise InvalidRequest(
            "slug must match ^[a-z0-9][a-z0-9-]{0,62}$ (lowercase letters, digits and dashes)", slug=slug
        )


def create(services: Services, caller: Caller, slug: str, description: str = "") -> KBInfo:
    """Create a KB whose first version holds a README.md. Raises Forbidden, InvalidRequest, AlreadyExists."""
    if not caller.is_admin:
        raise Forbidden("only the admin can create KBs")
    _check_slug(slug)
    check_description(description)
    refuse_secrets(description, "description")  # it lands in README.md
    if services.repos.exists(slug):
        raise AlreadyExists(f"a KB named {slug} already exists; pick another slug", slug=slug)
    readme = _README.format(slug=slug, description=description or "A knowledge base.").encode()
    version = services.repos.create(slug, readme, "admin <admin@kbserver.invalid>", f"create KB {slug}")
    services.control.add_kb(slug, description)
    services.committed(slug, version)
    return describe(services, caller, slug)


def _description(services: Services, slug: str) -> str:
    row = services.control.kb(slug)
    return row.description if row else ""


def visible(services: Services, caller: Caller) -> list[KBSummary]:
    """The KBs the caller can see, by slug."""
    out: list[KBSummary] = []
    for slug in services.repos.slugs():
        perm = permission(caller, slug)
        if perm is None:
            continue
        out.append(
            KBSummary(
                slug=slug,
                description=_description(services, slug),
                head=services.repos.repo(slug).head(),
                permission=perm,
            )
        )
    return out


def slugs(services: Services, caller: Caller) -> list[str]:
    """The slugs of the KBs the caller can see, sorted (what `visible` lists, without reading each
    KB's description and head: an MCP call that omits `kb` asks this every time)."""
    return [slug for slug in services.repos.slugs() if permission(caller, slug) is not None]


def repository(services: Services, caller: Caller, slug: str) -> Path:
    """The folder of the KB's bare git repository, for a caller who may read it (`git clone`).

    Raises NotFound, also when the caller may not see the KB.
    """
    require_read(services, caller, slug)
    check_clone(caller, services.repos.repo(slug), str(services.repos.path(slug)))
    return services.repos.path(slug)


def describe(services: Services, caller: Caller, slug: str) -> KBInfo:
    """A KB with its head, file count, indexed version, the caller's permission and limits.

    Raises NotFound.
    """
    perm = require_read(services, caller, slug)
    repo = services.repos.repo(slug)
    head = repo.head()
    return KBInfo(
        slug=slug,
        description=_description(services, slug),
        head=head,
        file_count=repo.file_count(head),
        indexed_version=services.progress.covered(INDEX_SINK, slug),
        permission=perm,
        limits=services.limits(slug),
    )


def set_limits(
    services: Services,
    caller: Caller,
    slug: str,
    max_file_bytes: int | None = None,
    max_files: int | None = None,
) -> KBInfo:
    """Set a KB's own write limits (None keeps the current value).

    Raises Forbidden, NotFound, InvalidRequest.
    """
    if not caller.is_admin:
        raise Forbidden("only the admin can change a KB's limits")
    require_read(services, caller, slug)
    row = services.control.kb(slug)
    current = dict(row.limits) if row else {}
    for name, value in (("max_file_bytes", max_file_bytes), ("max_files", max_files)):
        if value is not None:
            if not isinstance(value, int) or value < 1:
                raise InvalidRequest(f"{name} must be a positive whole number", **{name: value})
            current[name] = value
    services.control.set_limits(slug, current)
    return describe(services, caller, slug)


def _collect(folder: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    found: list[tuple[str, Path]] = []
    skipped: list[str] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            full = Path(root) / name
            rel = full.relative_to(folder).as_posix()
            if full.is_symlink() or not full.is_file():
                skipped.append(f"{rel}: not a regular file")
                continue
            found.append((rel, full))
    return found, skipped


class _NoFiles:
    """The tree of a KB that does not exist yet: imports are checked against it before it is created."""

    def read(self, path: str) -> bytes | None:
        return None

    def is_dir(self, path: str) -> bool:
        return False

    def case_twins(self, folder: str, name: str) -> list[str]:
        return []


def _as_changes(tip: Tree, texts: dict[str, str], paths: list[str]) -> list[FileChange]:
    return [
        Overwrite(path=p, mode="overwrite", content=texts[p])
        if tip.read(p) is not None
        else Create(path=p, mode="create", content=texts[p])
        for p in paths
    ]


def import_folder(
    services: Services,
    caller: Caller,
    slug: str,
    folder: Path,
    progress: Callable[[int, int], None] | None = None,
    description: str = "",
    delete: bool = False,
) -> ImportResult:
    """Import every text file under `folder` into `slug` (created when missing), through the write path.

    Every file is checked first, as a write checks it (path, size, credentials). Only files whose
    bytes differ from the KB's are written, as versions of at most the KB's `max_files` each (one
    version when they fit); an import that changes nothing makes no version. Without `delete` an
    import never removes a file; with it, the KB's files that the folder does not hold are deleted
    too (the KB mirrors the folder). Files that are not UTF-8 text are skipped, reported, and never
    deleted. Raises Forbidden, InvalidRequest, TooLarge, SecretDetected: a refused import changes
    nothing.
    """
    if not caller.is_admin:
        raise Forbidden("only the admin can import folders")
    _check_slug(slug)
    if not folder.is_dir():
        raise InvalidRequest(f"{folder} is not a folder", folder=str(folder))
    found, skipped = _collect(folder)
    texts: dict[str, str] = {}
    present: set[str] = set()  # skipped files included: never deleted by a mirror
    for done, (rel, full) in enumerate(found, 1):
        rel = check_path(rel)
        present.add(rel)
        try:
            text = full.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(f"{rel}: not UTF-8 text")
            continue
        if "\x00" in text:
            skipped.append(f"{rel}: binary (NUL bytes)")
            continue
        texts[rel] = text
        if progress:
            progress(done, len(found))
    limits = services.limits(slug)
    exists = services.repos.exists(slug)
    start: Tree = services.repos.repo(slug).view(services.repos.repo(slug).head()) if exists else _NoFiles()
    changed = [p for p in texts if start.read(p) != texts[p].encode("utf-8")]
    gone: list[str] = []
    if delete and exists:
        head_view = services.repos.repo(slug).view(services.repos.repo(slug).head())
        gone = sorted(p for p, _ in head_view.walk() if p not in present)
    if changed:  # every rule of a write, for all files at once, before anything is written
        apply(
            start, _as_changes(start, texts, changed), limits.model_copy(update={"max_files": len(changed)})
        )
    if not exists:
        create(services, caller, slug, description)
    unchanged = len(texts) - len(changed)
    if not changed and not gone:
        head = services.repos.repo(slug).head()
        return ImportResult(slug=slug, version=head, files=0, skipped=skipped, unchanged=unchanged)
    work: list[tuple[str, str | None]] = [(p, texts[p]) for p in changed] + [(p, None) for p in gone]
    step = limits.max_files
    version = None
    for first in range(0, len(work), step):
        part = work[first : first + step]
        what = f"{len(changed)} files" + (f", deleted {len(gone)}" if gone else "")
        message = f"import {what} from {folder.name}"
        if len(part) < len(work):
            message = f"import files {first + 1}-{first + len(part)} of {len(work)} from {folder.name}"
        tip = services.repos.repo(slug).view(services.repos.repo(slug).head())
        changes: list[FileChange] = [
            _as_changes(tip, texts, [p])[0] if text is not None else Delete(path=p, mode="delete")
            for p, text in part
        ]
        result = writes.submit(services, caller, slug, WriteRequest(files=changes, message=message))
        assert isinstance(result, WriteResult)  # the admin's writes are never proposals
        version = result.version
    return ImportResult(
        slug=slug,
        version=version,
        files=len(changed),
        skipped=skipped,
        deleted=len(gone),
        unchanged=unchanged,
    )
