"""A KB at a glance: versions per author per day over the last 30 days, what the last 7 changed, and
each agent's recent writes.

Everything comes from one bounded walk of main, newest first, that stops at the first version older
than the window (or after MAX_WALK versions). The walk is kept per repository and moved forward with
the head: a new head walks only down to the head it replaced. The changed paths of each version of
the week (one tree diff each) are kept beside it, so a week page after a write diffs one version.
"""

from __future__ import annotations

import datetime
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from kbserver.core.model import Caller, utc_iso
from kbserver.services import kbs
from kbserver.services.context import Services
from kbserver.services.parts import Repository
from kbserver.services.reviewing.review import MAX_UNREVIEWED, REVIEWED_KINDS, require_reviewer
from kbserver.services.reviewing.versions import author_kind
from kbserver.store import Change

__all__ = [
    "MAX_LISTED",
    "MAX_WALK",
    "WEEK_DAYS",
    "WINDOW_DAYS",
    "Activity",
    "AgentActivity",
    "AuthorWeek",
    "SinkLag",
    "Week",
    "WeekFile",
    "agents",
    "glance",
    "week",
]

WINDOW_DAYS = 30  # the chart: today (UTC) and the 29 days before it
WEEK_DAYS = 7  # the week page: today and the 6 days before it
MAX_WALK = 20_000  # versions one walk looks at, at most (`complete` is False past it)
MAX_LISTED = 100  # files of each kind (added, changed, deleted) a week lists


@dataclass(frozen=True)
class _Seen:
    """One version as the counts need it."""

    version: str
    seconds: int
    author: str
    kind: str


@dataclass
class _Walk:
    head: str
    since: int  # the walk holds every version from `head` down to the first older than this
    items: list[_Seen]  # newest first
    complete: bool  # False when MAX_WALK cut it before `since`
    changes: dict[str, tuple[Change, ...]] = field(default_factory=dict)  # version -> its tree diff
    disk: int | None = None  # bytes of the repository on disk, at `head`


_walks: weakref.WeakKeyDictionary[Repository, _Walk] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _day_start(now: float, days_back: int) -> int:
    """Midnight (UTC) `days_back` days before the day of `now`, as a Unix time."""
    today = datetime.datetime.fromtimestamp(now, datetime.UTC).date()
    start = datetime.datetime.combine(
        today - datetime.timedelta(days=days_back), datetime.time(), datetime.UTC
    )
    return int(start.timestamp())


def _walk(repo: Repository, head: str | None, since: int) -> _Walk | None:
    """The versions of main from `head` down to `since`, from the kept walk where it can."""
    if head is None:
        return None
    with _lock:
        kept = _walks.get(repo)
    if kept is not None and kept.head == head and kept.since == since:
        return kept
    new: list[_Seen] = []
    joined, complete = False, True
    for v in repo.first_parents(head):
        if kept is not None and v == kept.head and kept.since <= since:
            joined = True
            break
        c = repo.commit_info(v)
        if c.seconds < since:
            break
        if len(new) == MAX_WALK:
            complete = False
            break
        author, kind = author_kind(c)
        new.append(_Seen(v, c.seconds, author, kind))
    if joined and kept is not None:
        older = [i for i in kept.items if i.seconds >= since]
        items = (new + older)[:MAX_WALK]
        complete = kept.complete and len(new) + len(older) <= MAX_WALK
        live = {i.version for i in items}
        changes = {v: ch for v, ch in kept.changes.items() if v in live}
        disk = kept.disk if kept.head == head else None
    else:
        items, changes, disk = new, {}, None
    walk = _Walk(head=head, since=since, items=items, complete=complete, changes=changes, disk=disk)
    with _lock:
        _walks[repo] = walk
    return walk


def _changes(repo: Repository, walk: _Walk, item: _Seen) -> tuple[Change, ...]:
    found = walk.changes.get(item.version)
    if found is None:
        found = walk.changes[item.version] = tuple(repo.version_changes(item.version))
    return found


# -- the KB page ------------------------------------------------------------------------------------
@dataclass
class SinkLag:
    """How far one follower sink (the search index, the vectors) of this node is behind main."""

    sink: str
    covered: str | None  # the version it covers (None: nothing yet)
    versions: int | None  # versions of main after it (None: more than the walk holds)
    seconds: int | None  # how long the oldest of them has waited (None when none waits or unknown)


@dataclass
class Activity:
    """What the KB page shows at a glance."""

    slug: str
    head: str | None
    days: list[str]  # the WINDOW_DAYS dates (UTC, YYYY-MM-DD), oldest first
    counts: dict[str, list[int]]  # author -> versions made on each day of `days`, most active first
    totals: list[int]  # versions on each day
    complete: bool  # False when the walk stopped (MAX_WALK) before the window's start
    unreviewed: int
    unreviewed_more: bool
    pending: int
    lags: list[SinkLag]
    disk_bytes: int  # the repository on disk, history included
    file_count: int


def glance(services: Services, caller: Caller, slug: str, now: float | None = None) -> Activity:
    """The KB's last WINDOW_DAYS days: versions per author per day, unreviewed writes, pending
    proposals, how far this node's index and vectors are behind main, its size and file count.

    Raises NotFound, Forbidden.
    """
    require_reviewer(services, caller, slug)
    now = time.time() if now is None else now
    repo = services.repos.repo(slug)
    head = repo.head()
    since = _day_start(now, WINDOW_DAYS - 1)
    walk = _walk(repo, head, since)
    items = walk.items if walk else []
    days = [utc_iso(since + 86400 * d)[:10] for d in range(WINDOW_DAYS)]
    counts: dict[str, list[int]] = {}
    totals = [0] * WINDOW_DAYS
    for item in items:
        day = min((item.seconds - since) // 86400, WINDOW_DAYS - 1)  # a clock ahead counts as today
        counts.setdefault(item.author, [0] * WINDOW_DAYS)[day] += 1
        totals[day] += 1
    ranked = dict(sorted(counts.items(), key=lambda kv: (-sum(kv[1]), kv[0])))
    unreviewed, more = _unreviewed(services, slug, repo, head, items)
    if walk is not None and walk.disk is None:
        walk.disk = services.repos.disk_usage(slug)
    return Activity(
        slug=slug,
        head=head,
        days=days,
        counts=ranked,
        totals=totals,
        complete=walk.complete if walk else True,
        unreviewed=unreviewed,
        unreviewed_more=more,
        pending=len(services.control.proposals(slug, "pending")),
        lags=[_lag(services, repo, slug, sink, head, items, now) for sink in services.progress.sinks],
        disk_bytes=walk.disk if walk and walk.disk is not None else services.repos.disk_usage(slug),
        file_count=repo.file_count(head),
    )


def _unreviewed(
    services: Services, slug: str, repo: Repository, head: str | None, items: list[_Seen]
) -> tuple[int, bool]:
    """The review inbox's count: agent writes and approvals after the marker (at most MAX_UNREVIEWED),
    from the walk when the marker is in it, else from the versions' trailers."""
    if head is None:
        return 0, False
    reviewed, each = services.control.reviewed(slug), services.control.reviewed_each(slug)
    kinds = {i.version: i.kind for i in items}
    walked: Iterable[str] = kinds if reviewed in kinds else repo.first_parents(head)
    count = 0
    for v in walked:
        if v == reviewed:
            break
        if v in each:
            continue
        kind = kinds.get(v) or author_kind(repo.commit_info(v))[1]
        if kind in REVIEWED_KINDS:
            if count == MAX_UNREVIEWED:
                return count, True
            count += 1
    return count, False


def _lag(
    services: Services,
    repo: Repository,
    slug: str,
    sink: str,
    head: str | None,
    items: list[_Seen],
    now: float,
) -> SinkLag:
    covered = services.progress.covered(sink, slug)
    if head is None or covered == head:
        return SinkLag(sink, covered, 0, None)
    waiting: _Seen | None = None
    for n, item in enumerate(items):
        if item.version == covered:
            return SinkLag(sink, covered, n, int(now - waiting.seconds) if waiting else None)
        waiting = item
    return SinkLag(sink, covered, None, None)


# -- the week page ----------------------------------------------------------------------------------
@dataclass
class WeekFile:
    """A file the week changed: its change from the week's start to the head, who changed it, and the
    last version of the week that did."""

    path: str
    change: Literal["added", "modified", "deleted"]
    authors: list[str]  # the latest last
    version: str
    rewritten: bool  # some version of the week modified it (not only added or deleted it)


@dataclass
class AuthorWeek:
    author: str
    versions: int
    added: int  # files each of its versions added (counted per version)
    modified: int
    deleted: int
    last: str  # its newest version of the week
    last_time: str


@dataclass
class Week:
    """What changed in the last WEEK_DAYS days, from the files at the week's start to the head."""

    slug: str
    head: str | None
    since: str  # RFC 3339: midnight UTC, WEEK_DAYS - 1 days before today
    base: str | None  # the head when the week began (None: the KB began within the week)
    versions: int
    complete: bool  # False when the walk stopped (MAX_WALK) before the week's start
    files: dict[str, list[WeekFile]]  # "added", "modified", "deleted" -> at most MAX_LISTED, by path
    counts: dict[str, int]  # how many files of each change, listed or not
    authors: list[AuthorWeek]  # most versions first


def week(services: Services, caller: Caller, slug: str, now: float | None = None) -> Week:
    """The files the last WEEK_DAYS days added, modified and deleted (net: a file added and deleted
    within the week is in neither list), each with its authors, and each author's versions.

    Raises NotFound, Forbidden.
    """
    require_reviewer(services, caller, slug)
    now = time.time() if now is None else now
    repo = services.repos.repo(slug)
    head = repo.head()
    since = _day_start(now, WEEK_DAYS - 1)
    walk = _walk(repo, head, _day_start(now, WINDOW_DAYS - 1))
    items = [i for i in (walk.items if walk else []) if i.seconds >= since]
    first: dict[str, str | None] = {}  # path -> its blob at the week's start
    last: dict[str, tuple[str | None, str]] = {}  # path -> (its blob now, the last version changing it)
    authors: dict[str, list[str]] = {}
    rewritten: set[str] = set()
    per_author: dict[str, AuthorWeek] = {}
    for item in reversed(items):  # oldest first
        assert walk is not None
        changed = _changes(repo, walk, item)
        mine = per_author.get(item.author)
        if mine is None:
            mine = per_author[item.author] = AuthorWeek(item.author, 0, 0, 0, 0, item.version, "")
        mine.versions += 1
        mine.last, mine.last_time = item.version, utc_iso(item.seconds)
        for ch in changed:
            first.setdefault(ch.path, ch.old_blob)
            last[ch.path] = (ch.new_blob, item.version)
            who = authors.setdefault(ch.path, [])
            if item.author in who:
                who.remove(item.author)
            who.append(item.author)  # the latest last
            if ch.change == "modified":
                rewritten.add(ch.path)
                mine.modified += 1
            elif ch.change == "added":
                mine.added += 1
            else:
                mine.deleted += 1
    files: dict[str, list[WeekFile]] = {"added": [], "modified": [], "deleted": []}
    counts = dict.fromkeys(files, 0)
    for path in sorted(last):
        before, (after, version) = first[path], last[path]
        change = _net(before, after)
        if change is None:
            continue
        counts[change] += 1
        if len(files[change]) < MAX_LISTED:
            files[change].append(WeekFile(path, change, authors[path], version, path in rewritten))
    base = None
    if items:
        base = repo.commit_info(items[-1].version).parent
    elif head is not None:
        base = head
    return Week(
        slug=slug,
        head=head,
        since=utc_iso(since),
        base=base,
        versions=len(items),
        complete=walk.complete if walk else True,
        files=files,
        counts=counts,
        authors=sorted(per_author.values(), key=lambda a: (-a.versions, a.author)),
    )


def _net(before: str | None, after: str | None) -> Literal["added", "modified", "deleted"] | None:
    if before is None:
        return "added" if after is not None else None
    if after is None:
        return "deleted"
    return "modified" if after != before else None


# -- the agents page --------------------------------------------------------------------------------
@dataclass
class AgentActivity:
    """One agent's newest write (in the last WINDOW_DAYS days of the KBs it is linked to) and its
    writes of the last WEEK_DAYS days, per KB."""

    name: str
    last_kb: str | None = None
    last_version: str | None = None
    last_time: str | None = None
    week: dict[str, int] = field(default_factory=dict)  # slug -> versions of the week

    @property
    def week_total(self) -> int:
        return sum(self.week.values())


def agents(
    services: Services, caller: Caller, names: Iterable[str], now: float | None = None
) -> dict[str, AgentActivity]:
    """For each agent of `names`: its last write and its writes this week, over every KB.

    Raises Forbidden for an agent.
    """
    now = time.time() if now is None else now
    out = {name: AgentActivity(name) for name in names}
    week_start = _day_start(now, WEEK_DAYS - 1)
    last_seconds: dict[str, int] = {}
    for kb in kbs.visible(services, caller):
        require_reviewer(services, caller, kb.slug)
        repo = services.repos.repo(kb.slug)
        walk = _walk(repo, repo.head(), _day_start(now, WINDOW_DAYS - 1))
        for item in walk.items if walk else []:
            name = item.author.removeprefix("agent:")
            one = out.get(name) if item.author.startswith("agent:") else None
            if one is None:
                continue
            if item.seconds > last_seconds.get(name, -1):
                last_seconds[name] = item.seconds
                one.last_kb, one.last_version, one.last_time = kb.slug, item.version, utc_iso(item.seconds)
            if item.seconds >= week_start:
                one.week[kb.slug] = one.week.get(kb.slug, 0) + 1
    return out
