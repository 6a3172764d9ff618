"""The review inbox: unreviewed agent writes filtered, grouped by agent and run, undone ones marked."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller, VersionInfo
from kbserver.core.paths import check_prefix
from kbserver.services.context import Services
from kbserver.services.reviewing.review import MAX_UNREVIEWED, REVIEWED_KINDS, require_reviewer
from kbserver.services.reviewing.versions import author_kind, info

__all__ = ["Inbox", "InboxAgent", "InboxGroup", "InboxItem", "inbox"]


_DEFAULT_SUBJECTS = ("agent write: ", "approval: ")  # subjects a write gets without a message: no task


@dataclass
class InboxItem:
    """One unreviewed write and, when a later version undid it, that version."""

    version: VersionInfo
    undone_by: str | None = None


@dataclass
class InboxGroup:
    """The writes of one agent on one task: one run (run None: its writes outside a run), named by
    `task` (the run's label, else the message of its first write shown; None outside a run or when
    it had neither)."""

    author: str
    run: str | None
    items: list[InboxItem] = field(default_factory=list)
    task: str | None = None


@dataclass
class InboxAgent:
    """One agent's groups on the page, and how many writes they hold."""

    author: str
    groups: list[InboxGroup]

    @property
    def count(self) -> int:
        return sum(len(g.items) for g in self.groups)


@dataclass
class Inbox:
    """What the review page shows: the marker, the groups (newest first) and what the filters hid."""

    reviewed: str | None
    head: str | None
    groups: list[InboxGroup]
    shown: int  # writes in `groups`
    matching: int  # writes the filters keep (`shown` are the oldest of them)
    total: int  # unreviewed writes, filters aside
    more: bool  # more than MAX_UNREVIEWED unreviewed writes exist
    authors: list[str]  # every author of an unreviewed write, for the agent filter
    up_to: str | None  # where Mark reviewed moves the marker: everything the page shows is then reviewed

    @property
    def agents(self) -> list[InboxAgent]:
        """The groups by agent, in the order of each agent's first group (runs before the rest)."""
        by: dict[str, InboxAgent] = {}
        for g in self.groups:
            by.setdefault(g.author, InboxAgent(g.author, [])).groups.append(g)
        for a in by.values():
            a.groups.sort(key=lambda g: g.run is None)
        return list(by.values())


def inbox(
    services: Services,
    caller: Caller,
    slug: str,
    author: str | None = None,
    prefix: str | None = None,
    kind: str | None = None,
    shown: int = 50,
) -> Inbox:
    """The unreviewed writes after the marker that match `author`, a path `prefix` and `kind`, the
    oldest `shown` of them grouped by author and run, each undone one with the version that undid it.

    Raises NotFound, Forbidden, InvalidRequest.
    """
    require_reviewer(services, caller, slug)
    if kind and kind not in REVIEWED_KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(REVIEWED_KINDS)}", kind=kind)
    prefix = check_prefix(prefix) if prefix else None
    repo = services.repos.repo(slug)
    reviewed, head = services.control.reviewed(slug), repo.head()
    each = services.control.reviewed_each(slug)
    writes: list[tuple[str, str, str]] = []  # (version, author, kind), newest first
    undone: dict[str, str] = {}
    more = False
    if head is not None:
        for v in repo.first_parents(head):
            if v == reviewed:
                break
            c = repo.commit_info(v)
            target = c.trailers.get("Kb-Undo")
            if target and target not in undone:
                undone[target] = v
            if c.trailers.get("Kb-Kind") in REVIEWED_KINDS and v not in each:
                if len(writes) == MAX_UNREVIEWED:
                    more = True
                    break
                writes.append((v, *author_kind(c)))
    # Only a path filter needs every write's paths (a tree diff each, cached); the page needs its own.
    matching = [
        v
        for v, who, what in writes
        if (not author or who == author)
        and (not kind or what == kind)
        and (not prefix or any(ch.path.startswith(prefix) for ch in repo.version_changes(v)))
    ]
    page = [info(repo, v) for v in (matching[-shown:] if shown else [])]
    groups: dict[tuple[str, str | None], InboxGroup] = {}
    labels: dict[str, str | None] = {}
    for w in reversed(page):  # oldest first, so a run's task is its first write's message
        if w.run and w.run not in labels:
            row = services.control.run(w.run)
            labels[w.run] = row.label if row is not None else None
        task = labels.get(w.run) if w.run else None
        if task is None and w.run and not w.message.startswith(_DEFAULT_SUBJECTS):
            task = w.message
        group = groups.setdefault((w.author, w.run), InboxGroup(w.author, w.run, task=task))
        group.items.insert(0, InboxItem(w, undone.get(w.version)))
    order = {w.version: n for n, w in enumerate(page)}  # the group of the newest write comes first
    # Mark reviewed covers what the page shows: the head when it shows every unreviewed write (later
    # human edits need no review), else the newest write shown.
    whole = len(page) == len(writes) and not more
    up_to = head if whole and page else (page[0].version if page else None)
    return Inbox(
        reviewed=reviewed,
        head=head,
        groups=sorted(groups.values(), key=lambda g: order[g.items[0].version.version]),
        shown=len(page),
        matching=len(matching),
        total=len(writes),
        more=more,
        authors=sorted({who for _v, who, _k in writes}),
        up_to=up_to,
    )
