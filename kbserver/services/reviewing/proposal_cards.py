"""Proposals as a person judges them: the change against the version it was proposed on, what main
changed since, and in plain words whether approving can work."""

from __future__ import annotations

from dataclasses import dataclass

from kbserver.core.model import Caller
from kbserver.services.context import Services
from kbserver.services.models import DiffEntry, Proposal
from kbserver.services.reviewing.review import require_reviewer
from kbserver.services.reviewing.versions import diff
from kbserver.services.writing import proposals

__all__ = ["Card", "cards", "explain"]


@dataclass
class Card:
    """One pending proposal with what a reviewer needs to decide it."""

    proposal: Proposal
    proposed: list[DiffEntry]  # its change, against the version it was proposed on
    since: list[DiffEntry]  # what main changed since then in the files it touches
    advice: str | None  # why approving would fail, for people (None: approving would apply)
    can_approve: bool
    stale_paths: list[str]  # files to open and edit by hand instead


_ADVICE = {
    "stale": "Someone changed {paths} after the agent read it: approving would fail. "
    "Reject it, or edit the file yourself.",
    "already_exists": "{paths} was created by someone else after the agent proposed it: approving would "
    "fail. Reject it, or edit the file yourself.",
    "not_found": "{paths} was deleted or moved after the agent proposed the change: approving would fail. "
    "Reject it, or write the file yourself.",
    "no_match": "The text the agent meant to replace in {paths} is no longer there: approving would "
    "fail. Reject it, or edit the file yourself.",
    "ambiguous_match": "The text the agent meant to replace in {paths} now appears more than once: "
    "approving would fail. Reject it, or edit the file yourself.",
    "too_large": "Approving would make {paths} larger than this KB allows. Reject it, or edit the file "
    "yourself.",
}


def explain(code: str, paths: list[str], message: str) -> str:
    """Why an approval would fail, in words for people (the error's own message as a last resort)."""
    named = ", ".join(paths) if paths else "a file it changes"
    template = _ADVICE.get(code)
    if template is None:
        return f"Approving would fail now ({message}). Reject it, or edit the file yourself."
    return template.format(paths=named)


def cards(services: Services, caller: Caller, slug: str) -> list[Card]:
    """The pending proposals of `slug`, newest first, as cards. Raises NotFound, Forbidden."""
    require_reviewer(services, caller, slug)
    repo = services.repos.repo(slug)
    head = repo.head()
    out = []
    for p in proposals.listing(services, caller, slug, "pending").proposals:
        row = services.control.proposal(slug, p.id)
        paths = [f.path for f in p.files]
        proposed: list[DiffEntry] = []
        if row is not None and row.ref_commit:
            proposed = diff(repo, repo.changes(p.base, row.ref_commit))
        since: list[DiffEntry] = []
        if head is not None and p.base != head:
            since = diff(repo, [ch for ch in repo.changes(p.base, head) if ch.path in paths])
        advice, stale_paths = None, []
        if p.conflict is not None:
            named = (p.conflict.model_extra or {}).get("path")
            stale_paths = [str(named)] if isinstance(named, str) else [e.path for e in since] or paths
            advice = explain(p.conflict.code, stale_paths, p.conflict.message)
        out.append(Card(p, proposed, since, advice, p.conflict is None, stale_paths))
    return out
