"""The review inbox: agent writes since the "reviewed up to" marker, Undo, Mark reviewed."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import Stale
from kbserver.services import kbs, review, versions
from kbserver.services.auth import ADMIN
from kbserver.web.page import admin_form, call, expand, render, see_other, services_of
from kbserver.web.session import require_admin

__all__ = ["SHOWN", "mark_reviewed", "review_page", "undo"]

SHOWN = 50  # writes shown (with their diffs) on one review page


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def review_page(request: Request) -> Response:
    require_admin(request)
    slug, services = _slug(request), services_of(request)
    kb = await call(kbs.describe, services, ADMIN, slug)
    status = await call(review.status, services, ADMIN, slug)
    unreviewed = list(status.unreviewed)
    shown = unreviewed[-SHOWN:]  # the oldest ones first, when there are many
    writes = [await call(versions.get, services, ADMIN, slug, v.version) for v in shown]
    # Mark reviewed moves the marker up to what this page showed: the head it loaded when every
    # unreviewed write is on it (later human edits need no review), else the newest write shown.
    whole = len(shown) == len(unreviewed) and not status.more
    up_to = kb.head if whole else shown[0].version
    return render(
        request,
        "review.html",
        slug=slug,
        marker=status,
        writes=writes,
        up_to=up_to,
        hidden=len(unreviewed) - len(shown),
    )


async def undo(request: Request) -> Response:
    form = await admin_form(request)
    slug, services = _slug(request), services_of(request)
    version = await expand(request, slug, str(request.path_params["version"]))
    try:
        result = await call(review.undo, services, ADMIN, slug, version, form.get("message") or None)
    except Stale as err:
        target = await call(versions.get, services, ADMIN, slug, version)
        return render(request, "undo_conflict.html", 409, slug=slug, v=target, error=err)
    return see_other(f"/admin/kbs/{slug}/versions/{result.version}")


async def mark_reviewed(request: Request) -> Response:
    form = await admin_form(request)
    slug = _slug(request)
    version = await expand(request, slug, form.get("version", ""))
    await call(review.mark, services_of(request), ADMIN, slug, version)
    return see_other(f"/admin/kbs/{slug}/review")
