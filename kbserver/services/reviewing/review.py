"""Review: undo one version, the "reviewed up to" marker and the agent writes after it, comparisons."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from kbserver.changes import Applied, sha256_hex
from kbserver.core.errors import ApprovalUnavailable, Forbidden, InvalidRequest, NotFound, Stale
from kbserver.core.model import Caller, VersionInfo, WriteResult
from kbserver.core.paths import check_path
from kbserver.services import kbs
from kbserver.services.access.auth import require_read, require_write
from kbserver.services.context import Services
from kbserver.services.models import (
    Change,
    DiffEntry,
    EditConflict,
    FileNow,
    KBOverview,
    ReviewStatus,
    VersionCompare,
    VersionPage,
)
from kbserver.services.parts import Files, Repository
from kbserver.services.reading.privacy import check_writes
from kbserver.services.reviewing.versions import diff, info
from kbserver.services.writing.commits import commit
from kbserver.services.writing.reserved import check_owner

__all__ = [
    "MAX_UNREVIEWED",
    "REVIEWED_KINDS",
    "compare",
    "conflict",
    "history",
    "mark",
    "mark_each",
    "overview",
    "require_decider",
    "require_reviewer",
    "status",
    "undo",
]

REVIEWED_KINDS = ("agent_write", "approval")
"""The kinds of version a person reviews: what agents wrote, directly or through an approval."""

MAX_UNREVIEWED = 500
"""At most this many unreviewed versions are listed (newest first); `more` says when there are others."""

_SCAN = 5000  # versions a filtered history page looks at, at most, before it answers with a cursor


def _sha(data: bytes | None) -> str | None:
    return sha256_hex(data) if data is not None else None


def undo(
    services: Services, caller: Caller, slug: str, version: str, message: str | None = None
) -> WriteResult:
    """A new `revert` version that puts back, on the head, the files `version` changed as they were
    before it.

    Refused with Stale (details `path`, `expected_sha256`, `actual_sha256`, `changed_in`) when a later
    version changed one of those files again. Raises NotFound, Forbidden, ApprovalUnavailable,
    InvalidRequest (nothing to undo), Stale.
    """
    permission = require_write(services, caller, slug)
    if permission == "read_write_ask":
        raise ApprovalUnavailable("undo needs read_write; ask an admin to undo this version", slug=slug)
    repo = services.repos.repo(slug)
    target = repo.resolve(version)
    parent = repo.commit_info(target).parent
    changed = repo.changes(parent, target)
    if not changed:
        raise InvalidRequest(f"version {target} changed no file; nothing to undo", version=target)
    after, before = repo.view(target), repo.view(parent)

    def job(tip: Files) -> list[Applied]:
        applied = []
        for ch in changed:
            now, then = tip.read(ch.path), after.read(ch.path)
            if now != then:
                every = _changed_since(repo, tip, ch.path, target)
                raise Stale(
                    f"{ch.path} changed again after version {target[:12]}, {_in_words(every)}; "
                    f"undo {'that later version' if len(every) == 1 else 'those later versions'} "
                    "first, newest first, or edit the file by hand",
                    path=ch.path,
                    expected_sha256=_sha(then),
                    actual_sha256=_sha(now),
                    changed_in=every[0] if every else None,
                    changed_in_all=every,
                )
            old = before.read(ch.path)
            if old is None:
                applied.append(Applied(ch.path, "delete", None, None))
            else:
                applied.append(
                    Applied(ch.path, "create" if now is None else "overwrite", old, sha256_hex(old))
                )
        check_owner(caller, (a.path for a in applied), "undo")
        return check_writes(caller, tip, applied)

    return commit(
        services,
        caller,
        slug,
        job,
        kind="revert",
        message=message or f"undo {target[:12]}",
        run_id=None,
        default_subject="undo",
        trailers={"Kb-Undo": target},
    )


_NAMED = 5  # later versions an undo refusal names by id (the count covers them all)


def _changed_since(repo: Repository, tip: Files, path: str, target: str) -> list[str]:
    """Every version after `target` up to `tip` that changed `path`, newest first."""
    if tip.version is None:
        return []
    found = []
    for v in repo.path_history(tip.version, path):
        if v == target or repo.reaches(target, v):
            break
        found.append(v)
    return found


def _in_words(versions: list[str]) -> str:
    """`in version abc…` or `in 3 later versions: a, b, c` (the newest first, at most _NAMED ids)."""
    if not versions:
        return "in a later version"
    if len(versions) == 1:
        return f"in version {versions[0][:12]}"
    named = ", ".join(v[:12] for v in versions[:_NAMED])
    rest = f" and {len(versions) - _NAMED} older" if len(versions) > _NAMED else ""
    return f"in {len(versions)} later versions (newest first: {named}{rest})"


def _changed_in(repo: Repository, tip: Files, path: str) -> str | None:
    """The latest version up to `tip` that changed `path` (for the conflict's explanation)."""
    if tip.version is None:
        return None
    return next(iter(repo.path_history(tip.version, path)), None)


def require_reviewer(services: Services, caller: Caller, slug: str) -> None:
    """Raises NotFound or Forbidden unless the caller may read the KB's review state: the admin or a
    person of any role (an agent may not). Deciding needs `Caller.may_review` besides."""
    require_read(services, caller, slug)
    if not caller.is_human:
        raise Forbidden("only the admin and people review a KB's versions")


def require_decider(services: Services, caller: Caller, slug: str) -> None:
    """Raises NotFound or Forbidden unless the caller may decide on the KB (admin, owner, its reviewer)."""
    require_reviewer(services, caller, slug)
    if not caller.may_review(slug):
        raise Forbidden(
            f"you are a {caller.role} and do not review KB {slug}; ask an owner to make you its reviewer",
            slug=slug,
        )


def status(services: Services, caller: Caller, slug: str) -> ReviewStatus:
    """The marker and the agent writes and approvals after the marker,
    newest first (at most MAX_UNREVIEWED; `more` is true past that). Raises NotFound, Forbidden."""
    require_reviewer(services, caller, slug)
    repo = services.repos.repo(slug)
    reviewed, each = services.control.reviewed(slug), services.control.reviewed_each(slug)
    head = repo.head()
    found: list[VersionInfo] = []
    more = False
    if head is not None:
        for v in repo.first_parents(head):
            if v == reviewed:
                break
            if v in each:
                continue
            item = info(repo, v)
            if item.kind in REVIEWED_KINDS:
                if len(found) == MAX_UNREVIEWED:
                    more = True
                    break
                found.append(item)
    return ReviewStatus(reviewed=reviewed, unreviewed=found, more=more)


def mark(services: Services, caller: Caller, slug: str, version: str) -> ReviewStatus:
    """Move the "reviewed up to" marker to `version` (a version on main); answers like `status`.

    Raises NotFound, Forbidden, InvalidRequest.
    """
    require_decider(services, caller, slug)
    repo = services.repos.repo(slug)
    target = repo.resolve(version)
    services.control.set_reviewed(slug, target, caller.actor)
    return status(services, caller, slug)


def mark_each(services: Services, caller: Caller, slug: str, versions: list[str]) -> ReviewStatus:
    """Mark these versions reviewed one by one (a group of the inbox), the marker left where it is;
    answers like `status`. Raises NotFound, Forbidden, InvalidRequest (none, or over MAX_UNREVIEWED)."""
    require_reviewer(services, caller, slug)
    if not 1 <= len(versions) <= MAX_UNREVIEWED:
        raise InvalidRequest(f"name between 1 and {MAX_UNREVIEWED} versions to mark reviewed")
    repo = services.repos.repo(slug)
    head = repo.head()
    targets = [repo.resolve(v) for v in versions]
    for t in targets:
        if head is None or not repo.reaches(head, t):
            raise NotFound(f"version {t} is not on main of KB {slug}", version=t)
    services.control.add_reviewed_each(slug, targets, caller.actor)
    return status(services, caller, slug)


def compare(services: Services, caller: Caller, slug: str, a: str, b: str) -> VersionCompare:
    """What changed from version `a` to version `b`.

    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    repo = services.repos.repo(slug)
    old, new = repo.resolve(a), repo.resolve(b)
    changes = repo.changes(old, new)
    return VersionCompare(
        **{"from": info(repo, old)},
        to=info(repo, new),
        diff=diff(repo, changes),
    )


def history(
    services: Services,
    caller: Caller,
    slug: str,
    path: str | None = None,
    author: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    scan: int = _SCAN,
) -> VersionPage:
    """Like `versions.listing`, filtered by `author` (e.g. `agent:bob`) and `kind` too.

    A page looks at no more than `scan` versions of main; `next_cursor` continues where it stopped.
    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    if not 1 <= limit <= 200:
        raise InvalidRequest("limit must be between 1 and 200", limit=limit)
    if path:
        check_path(path)
    repo = services.repos.repo(slug)
    start = repo.resolve(cursor) if cursor else repo.head()
    if start is None:
        return VersionPage(versions=[], next_cursor=None)
    stop: list[str | None] = [None]
    walk = _path_changes(repo, start, path, scan, stop) if path else repo.first_parents(start)
    found: list[VersionInfo] = []
    next_cursor = None
    for scanned, v in enumerate(islice(walk, scan + 1)):
        if len(found) == limit or scanned == scan:
            next_cursor = v
            break
        item = info(repo, v)
        if (author and item.author != author) or (kind and item.kind != kind):
            continue
        found.append(item)
    return VersionPage(versions=found, next_cursor=next_cursor or stop[0])


_STEP = 32  # versions the first look at a path's history judges; each further look twice as many


def _path_changes(
    repo: Repository, start: str, path: str, scan: int, stop: list[str | None]
) -> Iterator[str]:
    """The versions among the `scan` newest from `start` that changed `path`, newest first, looked
    for in growing steps, so a page of a file that changes often stops once it is full instead of
    judging all `scan`; `stop[0]` is set to where the look stopped (None: at the first version)."""
    at: str | None = start
    looked, step = 0, _STEP
    while at is not None and looked < scan:
        step = min(step, scan - looked)
        changed, at = repo.path_history_within(at, path, step)
        looked, step = looked + step, step * 2
        stop[0] = at
        yield from changed


def _count_unreviewed(services: Services, slug: str, head: str | None) -> tuple[int, bool]:
    """How many versions `status` would list (and whether there are more), from their trailers alone:
    no tree diff per version, which the KB list does not show."""
    repo = services.repos.repo(slug)
    reviewed, count = services.control.reviewed(slug), 0
    if head is None:
        return 0, False
    each = services.control.reviewed_each(slug)
    for v in repo.first_parents(head):
        if v == reviewed:
            break
        if v in each:
            continue
        c = repo.commit_info(v)
        if c.trailers.get("Kb-Kind") in REVIEWED_KINDS:
            if count == MAX_UNREVIEWED:
                return count, True
            count += 1
    return count, False


def overview(services: Services, caller: Caller) -> list[KBOverview]:
    """Every KB the admin sees, for the KB list: description, head and its time and writer, file
    count, pending proposals and unreviewed agent writes. Raises Forbidden for an agent."""
    if not caller.is_human:
        raise Forbidden("only the admin and people see the overview of every KB")
    out: list[KBOverview] = []
    for kb in kbs.visible(services, caller):
        slug = kb.slug
        repo = services.repos.repo(slug)
        head = repo.head()
        last = info(repo, head) if head else None
        count, more = _count_unreviewed(services, slug, head)
        out.append(
            KBOverview(
                slug=slug,
                description=kb.description,
                head=head,
                time=last.time if last else None,
                last_writer=last.author if last else None,
                file_count=repo.file_count(head),
                pending=len(services.control.proposals(slug, "pending")),
                unreviewed=count,
                unreviewed_more=more,
            )
        )
    return out


def conflict(services: Services, caller: Caller, slug: str, path: str, typed: str) -> EditConflict:
    """What a stale edit of `path` ran into: the file now (None when it was deleted), the latest
    version that changed it, and the diff from the file now to the `typed` text.

    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    check_path(path)
    repo = services.repos.repo(slug)
    head = repo.head()
    view = repo.view(head)
    data = view.read(path)
    current = None
    if data is not None:
        current = FileNow(content=data.decode("utf-8", "replace"), sha256=sha256_hex(data), version=head)
    later = _changed_in(repo, view, path)
    change: Change = "added" if data is None else "modified"
    return EditConflict(
        current=current,
        changed_by=info(repo, later) if later else None,
        diff=[DiffEntry(path=path, change=change, patch=repo.text_patch(path, data, typed.encode()))],
    )
