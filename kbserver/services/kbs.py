"""Use cases of KBs: create, list, describe, import a folder."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from kbserver.changes import refuse_secrets, scan_secrets
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest, SecretDetected, TooLarge
from kbserver.core.model import SLUG_PATTERN, Caller
from kbserver.core.paths import check_path
from kbserver.services.auth import permission, require_read
from kbserver.services.context import Services
from kbserver.services.indexing import INDEX_SINK
from kbserver.services.models import ImportResult, KBInfo, KBSummary
from kbserver.store import CommitPlan

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
    """The slugs of the KBs the caller can see, sorted."""
    return [kb.slug for kb in visible(services, caller)]


def repository(services: Services, caller: Caller, slug: str) -> Path:
    """The folder of the KB's bare git repository, for a caller who may read it (`git clone`).

    Raises NotFound, also when the caller may not see the KB.
    """
    require_read(services, caller, slug)
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


def import_folder(
    services: Services,
    caller: Caller,
    slug: str,
    folder: Path,
    progress: Callable[[int, int], None] | None = None,
    description: str = "",
) -> ImportResult:
    """Import every text file under `folder` as one version of `slug` (created when missing).

    Files that are not UTF-8 text are skipped and reported. Raises InvalidRequest, TooLarge,
    SecretDetected: an import with a bad path or a credential changes nothing.
    """
    if not caller.is_admin:
        raise Forbidden("only the admin can import folders")
    _check_slug(slug)
    if not folder.is_dir():
        raise InvalidRequest(f"{folder} is not a folder", folder=str(folder))
    found, skipped = _collect(folder)
    limits = services.limits(slug)
    changes: dict[str, bytes | None] = {}
    for done, (rel, full) in enumerate(found, 1):
        rel = check_path(rel)
        data = full.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(f"{rel}: not UTF-8 text")
            continue
        if "\x00" in text:
            skipped.append(f"{rel}: binary (NUL bytes)")
            continue
        if len(data) > limits.max_file_bytes:
            raise TooLarge(f"{rel} has {len(data)} bytes; the limit is {limits.max_file_bytes}", path=rel)
        rule = scan_secrets(text)
        if rule:
            raise SecretDetected(
                f"{rel} holds a credential ({rule}); remove it and import again", path=rel, rule=rule
            )
        changes[rel] = data
        if progress:
            progress(done, len(found))
    if not services.repos.exists(slug):
        create(services, caller, slug, description)
    if not changes:
        return ImportResult(slug=slug, version=services.repos.repo(slug).head(), files=0, skipped=skipped)
    _, writer = services.repos.get(slug)

    def job(tip: object) -> CommitPlan:
        return CommitPlan(
            changes,
            f"import {len(changes)} files from {folder.name}",
            "admin <admin@kbserver.invalid>",
            {"Kb-Actor": "admin", "Kb-Kind": "human_edit"},
        )

    version, _, _ = writer.submit(job)
    services.committed(slug, version)
    return ImportResult(slug=slug, version=version, files=len(changes), skipped=skipped)
