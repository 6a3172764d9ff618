"""The review inbox: agent writes since the "reviewed up to" marker, grouped; Undo, Mark reviewed."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import Stale
from kbserver.core.model import Caller
from kbserver.services.access.auth import require_write
from kbserver.services.models import VersionDetail
from kbserver.services.reviewing import inbox, review, versions
from kbserver.web import records
from kbserver.web.page import admin_form, call, expand, flash, render, see_other, services_of
from kbserver.web.session import require_admin
from kbserver.web.summary import in_words

__all__ = ["SHOWN", "mark_reviewed", "review_page", "undo"]

SHOWN = 50  # writes shown (with their diffs) on one review page
_FILTERS = ("agent", "prefix", "kind")


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def review_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    q = {k: request.query_params.get(k, "").strip() for k in _FILTERS}
    found = await call(
        inbox.inbox, services, who, slug, q["agent"] or None, q["prefix"] or None, q["kind"] or None, SHOWN
    )
    details: dict[str, VersionDetail] = {}
    changed: dict[str, dict[str, records.RecordDiff]] = {}
    for group in found.groups:
        for item in group.items:
            v = await call(versions.get, services, who, slug, item.version.version)
            details[v.version] = v
            paths = [d.path for d in v.diff]
            changed[v.version] = await call(records.record_diffs, services, slug, paths, v.parent, v.version)
    named = {  # each write's files titled as they read in that version, not today
        v.version: await call(records.titles, services, slug, [d.path for d in v.diff], v.version)
        for v in details.values()
    }
    filters = {k: v for k, v in q.items() if v}
    return render(
        request,
        "review.html",
        slug=slug,
        found=found,
        details=details,
        records=changed,
        titles=named,
        words={v: in_words(d.diff) for v, d in details.items()},
        filters=filters,
        back=f"/admin/kbs/{slug}/review" + (f"?{urlencode(filters)}" if filters else ""),
        agent=q["agent"],
        prefix=q["prefix"],
        kind=q["kind"],
    )


def _back(form: dict[str, str], slug: str) -> str:
    """The review page the form came from (its filters kept), never another site."""
    back = form.get("back", "")
    return back if back.startswith(f"/admin/kbs/{slug}/review") else f"/admin/kbs/{slug}/review"


async def undo(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    slug, services = _slug(request), services_of(request)
    version = await expand(request, slug, str(request.path_params["version"]))
    if form.get("confirm") == "ask":  # the review page's Undo: show what it would do first
        await call(require_write, services, who, slug)  # whom undo refuses gets no Undo to confirm
        target = await call(versions.get, services, who, slug, version)
        return render(request, "undo_confirm.html", slug=slug, v=target, back=_back(form, slug))
    try:
        result = await call(review.undo, services, who, slug, version, form.get("message") or None)
    except Stale as err:
        target = await call(versions.get, services, who, slug, version)
        return render(request, "undo_conflict.html", 409, slug=slug, v=target, error=err)
    flash(
        request,
        f"Undid version {version[:12]}: its files are back as they were before it, in a new revert version.",
        slug,
        result.version,
    )
    return see_other(
        _back(form, slug) if form.get("back") else f"/admin/kbs/{slug}/versions/{result.version}"
    )


async def mark_reviewed(request: Request) -> Response:
    """Mark reviewed up to a version (`version`), or one group's writes (`versions`, space-separated)."""
    who = require_admin(request)
    form = await admin_form(request)
    slug = _slug(request)
    if "versions" in form:
        return await _mark_group(request, form, slug, who)
    version = await expand(request, slug, form.get("version", ""))
    status = await call(review.mark, services_of(request), who, slug, version)
    left = len(status.unreviewed)
    flash(
        request,
        f"Marked reviewed up to version {version[:12]}; "
        + (
            f"{left}{'+' if status.more else ''} agent write{'' if left == 1 else 's'} left to review."
            if left
            else "nothing is left to review."
        ),
        slug,
        version,
    )
    return see_other(_back(form, slug))


async def _mark_group(request: Request, form: dict[str, str], slug: str, who: Caller) -> Response:
    named = form["versions"].split()
    full = [await expand(request, slug, v) for v in named[: review.MAX_UNREVIEWED + 1]]
    status = await call(review.mark_each, services_of(request), who, slug, full)
    left = len(status.unreviewed)
    flash(
        request,
        f"Marked {len(full)} write{'' if len(full) == 1 else 's'} reviewed"
        + (f" ({form['task']})" if form.get("task") else "")
        + "; "
        + (
            f"{left}{'+' if status.more else ''} agent write{'' if left == 1 else 's'} left to review."
            if left
            else "nothing is left to review."
        ),
        slug,
    )
    return see_other(_back(form, slug))
