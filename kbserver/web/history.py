"""Versions: the list with its labels and filters, one version's diff, a comparison, Revert."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import InvalidRequest
from kbserver.services import kbs
from kbserver.services.reviewing import review, versions
from kbserver.web import records
from kbserver.web.page import KINDS, admin_form, call, expand, flash, render, see_other, services_of
from kbserver.web.session import require_admin

__all__ = ["PATH_SCAN", "compare_form", "revert", "version_page", "versions_page"]

PAGE = 30
PATH_SCAN = 100  # versions of main a page of one path's history looks at (its "Older" link looks further)


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def versions_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    q = request.query_params
    path, author, kind = q.get("path", "").strip(), q.get("author", "").strip(), q.get("kind", "")
    cursor = q.get("cursor") or None
    if kind and kind not in KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}", kind=kind)
    await call(kbs.describe, services, who, slug)
    page = await call(
        review.history,
        services,
        who,
        slug,
        path or None,
        author or None,
        kind or None,
        PAGE,
        cursor,
        *([PATH_SCAN] if path else []),  # a look at every version is cheap without a path to judge
    )
    filters = {k: v for k, v in (("path", path), ("author", author), ("kind", kind)) if v}
    older = None
    if page.next_cursor:
        older = f"/admin/kbs/{slug}/versions?" + urlencode({**filters, "cursor": page.next_cursor})
    return render(
        request,
        "versions.html",
        slug=slug,
        page=page,
        path=path,
        author=author,
        kind=kind,
        older=older,
        first=cursor is None,
        scanned=PATH_SCAN if path else None,
    )


async def version_page(request: Request) -> Response:
    who = require_admin(request)
    slug, services = _slug(request), services_of(request)
    version = str(request.path_params["version"])
    if "..." in version:
        a, _, b = version.partition("...")
        full_a, full_b = await expand(request, slug, a), await expand(request, slug, b)
        if (full_a, full_b) != (a, b):  # a short id: the page's address names the full ones
            return see_other(f"/admin/kbs/{slug}/versions/{full_a}...{full_b}")
        compared = await call(review.compare, services, who, slug, a, b)
        return render(request, "compare.html", slug=slug, compared=compared)
    full = await expand(request, slug, version)
    if full != version:
        return see_other(f"/admin/kbs/{slug}/versions/{full}")
    found = await call(versions.get, services, who, slug, version)
    head = (await call(kbs.describe, services, who, slug)).head
    paths = [d.path for d in found.diff]
    changed = await call(records.record_diffs, services, slug, paths, found.parent, found.version)
    named = await call(records.titles, services, slug, paths, found.version)
    return render(
        request, "version.html", slug=slug, v=found, head=head, error=None, records=changed, titles=named
    )


async def compare_form(request: Request) -> Response:
    """The compare form's answer: the page of `a...b` (which checks both versions)."""
    require_admin(request)
    q, slug = request.query_params, _slug(request)
    if not q.get("a", "").strip() or not q.get("b", "").strip():
        raise InvalidRequest("pick two versions to compare: one to compare from and one to compare to")
    a, b = await expand(request, slug, q["a"]), await expand(request, slug, q["b"])
    return see_other(f"/admin/kbs/{slug}/versions/{a}...{b}")


async def revert(request: Request) -> Response:
    """Revert asks first: without `confirm=yes` the answer is the page of what it would change."""
    who = require_admin(request)
    form = await admin_form(request)
    slug, services = _slug(request), services_of(request)
    version = await expand(request, slug, str(request.path_params["version"]))
    if form.get("confirm") != "yes":
        plan = await call(versions.revert_plan, services, who, slug, version)
        return render(request, "revert_confirm.html", slug=slug, plan=plan)
    result = await call(versions.revert, services, who, slug, version, form.get("message") or None)
    flash(
        request,
        f"Reverted: the files are as in version {version[:12]} again, in a new revert version.",
        slug,
        result.version,
    )
    return see_other(f"/admin/kbs/{slug}/versions/{result.version}")
