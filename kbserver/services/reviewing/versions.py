"""Versions: history newest first, one version with its diff, and revert to a version."""

from __future__ import annotations

from dataclasses import dataclass

from kbserver.changes import Applied, sha256_hex
from kbserver.core.errors import ApprovalUnavailable, InvalidRequest, NotFound
from kbserver.core.model import Caller, VersionInfo, WriteResult
from kbserver.core.paths import check_path
from kbserver.services.access.auth import require_read, require_write
from kbserver.services.context import Services
from kbserver.services.models import DiffEntry, VersionDetail, VersionPage
from kbserver.services.parts import Files, Repository
from kbserver.services.reading.privacy import check_writes, hides_version
from kbserver.services.writing.commits import commit
from kbserver.services.writing.reserved import check_owner
from kbserver.store import Change, CommitInfo

__all__ = [
    "MAX_LIMIT",
    "RevertPlan",
    "author_kind",
    "diff",
    "expand",
    "get",
    "info",
    "listing",
    "revert",
    "revert_plan",
]

MAX_LIMIT = 200


def diff(repo: Repository, changes: list[Change]) -> list[DiffEntry]:
    """`changes` (a tree diff) as the API shows them: each path with its unified diff."""
    return [DiffEntry(path=ch.path, change=ch.change, patch=repo.patch(ch)) for ch in changes]


def author_kind(c: CommitInfo) -> tuple[str, str]:
    """Who made a version (`agent:NAME`, `person:NAME` or `admin`) and its kind, from its trailers.

    An approval's `Kb-Actor` is the person who let it in; the version is still the agent's write,
    named by the commit's author.
    """
    kind = c.trailers.get("Kb-Kind") or ("create" if c.parent is None else "human_edit")
    if kind == "approval":
        return c.author, kind
    return c.trailers.get("Kb-Actor") or c.author, kind


def info(repo: Repository, version: str, changes: list[Change] | None = None) -> VersionInfo:
    """A version as the API shows it: who, what kind, which paths, which run.

    `changes` against the parent may be passed when the caller has them already.
    """
    c = repo.commit_info(version)
    if changes is None:
        changes = repo.version_changes(version)
    subject = c.message.split("\n", 1)[0]
    author, kind = author_kind(c)
    return VersionInfo(
        version=version,
        parent=c.parent,
        author=author,
        kind=kind,
        message=subject,
        time=c.time,
        paths=[ch.path for ch in changes],
        run=c.trailers.get("Kb-Run"),
    )


def listing(
    services: Services,
    caller: Caller,
    slug: str,
    path: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> VersionPage:
    """A page of versions newest first; `path` keeps the versions that changed it.

    `cursor` is the `next_cursor` of the previous page. Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}", limit=limit)
    if path is not None:
        path = check_path(path)
    repo = services.repos.repo(slug)
    start = _cursor(repo, cursor) if cursor else repo.head()
    if start is None:
        return VersionPage(versions=[], next_cursor=None)
    walk = repo.path_history(start, path) if path else repo.first_parents(start)
    shown: list[VersionInfo] = []
    more = None
    for v in walk:
        if len(shown) == limit:
            more = v
            break
        changes = repo.version_changes(v)
        if not hides_version(caller, repo, changes):  # another agent's private memory: its version too
            shown.append(info(repo, v, changes))
    return VersionPage(versions=shown, next_cursor=more)


def _cursor(repo: Repository, cursor: str) -> str | None:
    """The version a page starts at: errors name `cursor`, the field the caller sent."""
    try:
        return repo.resolve(cursor)
    except InvalidRequest:
        raise InvalidRequest(
            "cursor must be the next_cursor of an earlier page (a 40-hex version id)", cursor=cursor
        ) from None
    except NotFound:
        raise NotFound(
            f"cursor {cursor} is not a version of this KB; start again without a cursor", cursor=cursor
        ) from None


def expand(services: Services, caller: Caller, slug: str, version: str) -> str:
    """The full id of the version on main that `version` (7 to 40 hex digits, any case) starts.

    For people, who copy the short ids pages show. Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    return services.repos.repo(slug).expand(version.strip().lower())


def get(services: Services, caller: Caller, slug: str, version: str) -> VersionDetail:
    """One version plus its diff against its parent.

    Raises NotFound, InvalidRequest.
    """
    require_read(services, caller, slug)
    repo = services.repos.repo(slug)
    resolved = repo.resolve(version)
    changes = repo.version_changes(resolved)  # one tree diff for both
    if hides_version(caller, repo, changes):
        raise NotFound(f"no version {version} in KB {slug}", version=version)
    return VersionDetail(**info(repo, resolved, changes).model_dump(), diff=diff(repo, changes))


@dataclass(frozen=True)
class RevertPlan:
    """What a revert to `target` would do to the head, for a person to confirm first: each file it
    puts back (`restored`: changed since, `recreated`: deleted since, `removed`: added since) and the
    later versions it takes back (`later`, newest first; `later_count` counts them all)."""

    target: VersionInfo
    head: str | None
    restored: list[str]
    recreated: list[str]
    removed: list[str]
    later: list[VersionInfo]
    later_count: int

    @property
    def files(self) -> int:
        return len(self.restored) + len(self.recreated) + len(self.removed)


_PLAN_SHOWN = 20  # later versions a plan names (the count covers them all)


def revert_plan(services: Services, caller: Caller, slug: str, version: str) -> RevertPlan:
    """What `revert` of `version` would change now, written nowhere. Raises what `revert` raises
    before it writes: NotFound, Forbidden, InvalidRequest, ApprovalUnavailable."""
    permission = require_write(services, caller, slug)
    if permission == "read_write_ask":
        raise ApprovalUnavailable("reverts need read_write; ask an admin to revert", slug=slug)
    repo = services.repos.repo(slug)
    target = repo.resolve(version)
    head = repo.head()
    changes = repo.changes(head, target) if head else []
    later: list[VersionInfo] = []
    count = 0
    if head is not None and repo.reaches(head, target):
        for v in repo.first_parents(head):
            if v == target:
                break
            if hides_version(caller, repo, repo.version_changes(v)):
                continue
            count += 1
            if len(later) < _PLAN_SHOWN:
                later.append(info(repo, v))
    return RevertPlan(
        target=info(repo, target),
        head=head,
        restored=[c.path for c in changes if c.change == "modified"],
        recreated=[c.path for c in changes if c.change == "added"],
        removed=[c.path for c in changes if c.change == "deleted"],
        later=later,
        later_count=count,
    )


def revert(
    services: Services, caller: Caller, slug: str, version: str, message: str | None = None
) -> WriteResult:
    """A new version whose files equal those of `version`; history is kept.

    Raises NotFound, Forbidden, InvalidRequest (nothing to revert), ApprovalUnavailable.
    """
    permission = require_write(services, caller, slug)
    if permission == "read_write_ask":
        raise ApprovalUnavailable("reverts need read_write; ask an admin to revert", slug=slug)
    repo = services.repos.repo(slug)
    target = repo.resolve(version)
    target_view = repo.view(target)

    def job(tip: Files) -> list[Applied]:
        applied = []
        for ch in repo.changes(tip.version, target):
            data = target_view.read(ch.path) if ch.change != "deleted" else None
            mode = "delete" if data is None else "create" if ch.change == "added" else "overwrite"
            applied.append(Applied(ch.path, mode, data, sha256_hex(data) if data is not None else None))
        if not applied:
            raise InvalidRequest(
                f"the files already equal version {target}; nothing to revert", version=target
            )
        check_owner(caller, (a.path for a in applied), "revert")
        return check_writes(caller, tip, applied)

    return commit(
        services,
        caller,
        slug,
        job,
        kind="revert",
        message=message or f"revert to {target[:12]}",
        run_id=None,
        default_subject="revert",
    )
