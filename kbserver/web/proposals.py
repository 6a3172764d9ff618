"""Proposals of cautious agents: approval cards with their diff and staleness, Approve and Reject."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import KBError
from kbserver.services import kbs
from kbserver.services.reviewing import proposal_cards
from kbserver.services.writing import proposals
from kbserver.web import records
from kbserver.web.page import admin_form, call, flash, render, see_other, services_of
from kbserver.web.session import require_admin

__all__ = ["approve", "proposals_page", "reject"]


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def _page(
    request: Request, status: int = 200, error: KBError | None = None, failed: str = ""
) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    head = (await call(kbs.describe, services, who, slug)).head
    pending = await call(proposal_cards.cards, services, who, slug)
    decided = await call(proposals.listing, services, who, slug, None)
    recent = [p for p in decided.proposals if p.status != "pending"][:20]
    paths = [f.path for c in pending for f in c.proposal.files]
    named = await call(records.titles, services, slug, paths, head)
    advice = None
    if error is not None:
        paths = [str(error.details["path"])] if isinstance(error.details.get("path"), str) else []
        advice = proposal_cards.explain(error.code, paths, error.message)
    return render(
        request,
        "proposals.html",
        status,
        slug=slug,
        head=head,
        pending=pending,
        titles=named,
        recent=recent,
        error=error,
        advice=advice,
        failed=failed,
    )


_ANCHOR = re.compile(r"[A-Za-z0-9_-]{1,100}")


async def proposals_page(request: Request) -> Response:
    """`?p=ID` (the approval card's link) answers with the page at that proposal's anchor: a fragment
    never reaches the server, so one kept in the query survives signing in on the way."""
    require_admin(request)
    focus = request.query_params.get("p", "")
    if _ANCHOR.fullmatch(focus):
        return see_other(f"/admin/kbs/{_slug(request)}/proposals#p-{focus}")
    return await _page(request)


async def approve(request: Request) -> Response:
    who = require_admin(request)
    await admin_form(request)
    slug, pid = _slug(request), str(request.path_params["proposal"])
    try:
        result = await call(proposals.approve, services_of(request), who, slug, pid)
    except KBError as err:
        if err.status == 404:
            raise
        return await _page(request, err.status, err, pid)
    flash(
        request,
        f"Approved proposal {pid}: its change is in the KB now, as a new approval version.",
        slug,
        result.version,
    )
    return see_other(f"/admin/kbs/{slug}/versions/{result.version}")


async def reject(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    slug, pid = _slug(request), str(request.path_params["proposal"])
    reason = form.get("reason", "").strip() or None
    await call(proposals.reject, services_of(request), who, slug, pid, reason)
    told = "the agent can read your reason" if reason else "no reason given"
    flash(request, f"Rejected proposal {pid}; nothing changed in the KB ({told}).", slug)
    return see_other(f"/admin/kbs/{slug}/proposals")
