"""Edit and Publish, New file and Delete: every change carries the sha256 the page was loaded with."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import KBError, Stale
from kbserver.core.model import Create, Delete, FileChange, Overwrite, WriteRequest, WriteResult
from kbserver.core.problems import problems
from kbserver.services import kbs
from kbserver.services.access.auth import require_write
from kbserver.services.reading import files
from kbserver.services.reviewing import review
from kbserver.services.writing import writes
from kbserver.web.page import admin_form, call, file_url, flash, render, see_other, services_of
from kbserver.web.session import require_admin

__all__ = ["delete", "delete_page", "edit_page", "new_page", "publish"]


def _slug(request: Request) -> str:
    return str(request.path_params["slug"])


async def edit_page(request: Request) -> Response:
    who = require_admin(request)
    slug, path = _slug(request), str(request.path_params["path"])
    await call(require_write, services_of(request), who, slug)  # a viewer gets no form
    found = await call(files.read, services_of(request), who, slug, path)
    return render(
        request,
        "edit.html",
        slug=slug,
        path=path,
        content=found.content,
        expected=found.sha256,
        new=False,
        message="",
        error=None,
    )


async def new_page(request: Request) -> Response:
    who = require_admin(request)
    slug = _slug(request)
    await call(require_write, services_of(request), who, slug)
    folder = request.query_params.get("folder", "")
    return render(
        request,
        "edit.html",
        slug=slug,
        path=folder,
        content="",
        expected="",
        new=True,
        message="",
        error=None,
    )


def _text(value: str) -> str:
    # Browsers send a textarea's line breaks as CRLF; KB files keep the LF they were written with.
    return value.replace("\r\n", "\n")


async def publish(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    slug, services = _slug(request), services_of(request)
    path, content = form.get("path", "").strip(), _text(form.get("content", ""))
    expected, message = form.get("expected_sha256", ""), form.get("message", "").strip() or None
    again = {"slug": slug, "path": path, "content": content, "expected": expected, "message": message or ""}
    try:
        change: FileChange
        if expected:
            change = Overwrite(mode="overwrite", path=path or "?", content=content, expected_sha256=expected)
        else:
            change = Create(mode="create", path=path or "?", content=content)
        req = WriteRequest(message=message, files=[change])
    except ValueError as err:  # pydantic: e.g. a malformed expected_sha256 sent by hand
        return render(request, "edit.html", 400, **again, new=not expected, error=_Plain(err))
    try:
        result = await call(writes.submit, services, who, slug, req)
    except Stale as err:
        conflict = await call(review.conflict, services, who, slug, path, content)
        return render(request, "conflict.html", 409, **again, error=err, conflict=conflict)
    except KBError as err:
        await call(kbs.describe, services, who, slug)  # an unknown KB is a 404 page, not a form
        return render(request, "edit.html", err.status, **again, new=not expected, error=err)
    if isinstance(result, WriteResult):
        flash(request, f"Published {path} as a new human edit.", slug, result.version)
        return see_other(f"/admin/kbs/{slug}/versions/{result.version}")
    return see_other(file_url(slug, path))


class _Plain:
    """A form that does not make a valid write (pydantic said why), shown like a KBError."""

    def __init__(self, err: ValueError) -> None:
        self.code, self.message = "invalid_request", str(err).splitlines()[0]
        if isinstance(err, ValidationError) and err.errors():
            first = problems(err, "form")[0]
            self.message = f"{first['field']}: {first['problem']}"


async def delete_page(request: Request) -> Response:
    who = require_admin(request)
    slug, path = _slug(request), str(request.path_params["path"])
    await call(require_write, services_of(request), who, slug)  # a viewer gets no form
    found = await call(files.read, services_of(request), who, slug, path)
    return render(request, "delete.html", slug=slug, path=path, file=found, error=None)


async def delete(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    slug, services = _slug(request), services_of(request)
    path, expected = form.get("path", ""), form.get("expected_sha256", "") or None
    try:
        req = WriteRequest(files=[Delete(mode="delete", path=path or "?", expected_sha256=expected)])
    except ValueError as err:
        return render(request, "error.html", 400, error=_Plain(err), slug=slug)
    try:
        result = await call(writes.submit, services, who, slug, req)
    except Stale as err:
        found = await call(files.read, services, who, slug, path)
        return render(request, "delete.html", 409, slug=slug, path=path, file=found, error=err)
    made = result.version if isinstance(result, WriteResult) else None
    flash(request, f"Deleted {path}; the history keeps it and Revert brings it back.", slug, made)
    return see_other(f"/admin/kbs/{slug}")
