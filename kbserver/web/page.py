"""What every admin page shares: templates, the form body, the session guard, calling a service.

jinja2 and its templates load with the first page rendered: a server nobody opens the admin of
does not carry them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from kbserver.core.errors import InvalidRequest, TooLarge
from kbserver.core.inputs import check_input
from kbserver.services import Services
from kbserver.services.models import DiffEntry
from kbserver.services.reviewing import versions
from kbserver.web.markup import DiffFile, highlight_snippet, parse_patch, render_markdown, when, when_short
from kbserver.web.session import check_csrf, csrf_token, require_admin, signed_in

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = [
    "KINDS",
    "LABELS",
    "MAX_FORM_BYTES",
    "admin_form",
    "call",
    "expand",
    "file_url",
    "flash",
    "login_form",
    "render",
    "see_other",
    "services_of",
    "when",
]

T = TypeVar("T")

MAX_FORM_BYTES = 2 * 1024 * 1024  # a 256 KiB file typed into a textarea, several times over
_MAX_FIELDS = 50

LABELS = {
    "agent_write": "agent write",
    "approval": "approval",
    "revert": "revert",
    "human_edit": "human edit",
    "create": "create",
}
KINDS = tuple(LABELS)


def file_url(slug: str, path: str) -> str:
    return f"/admin/kbs/{slug}/files/{quote(path)}"


def _short(version: object) -> str:
    return str(version)[:12] if version else "none"


def _diff_files(entries: Iterable[DiffEntry]) -> list[DiffFile]:
    return [parse_patch(e.path, e.change, e.patch) for e in entries]


@functools.cache
def _env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("kbserver.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        short=_short,
        label=lambda kind: LABELS.get(str(kind), str(kind).replace("_", " ")),
        diff=_diff_files,
        when=when,
        capitalize_first=lambda text: text[:1].upper() + text[1:],
        when_short=when_short,
    )
    env.globals.update(
        file_url=file_url,
        markdown=render_markdown,
        highlight=highlight_snippet,
        quote=quote,
        kinds=KINDS,
        labels=LABELS,
    )
    return env


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The page `template` with `context`, plus what base.html needs (CSRF field, login state) and
    what the signed-in caller may do, by the rules the services apply (`Caller.may_review`,
    `Caller.is_admin`): `may_decide` on the page's KB, `may_manage` people and agents. Pages show
    only those actions; the services refuse the rest."""
    has_session = "session" in request.scope  # not on the last-resort 500 page, outside the middleware
    token = csrf_token(request) if has_session else ""
    context.setdefault("slug", None)
    user = signed_in(request) if has_session else None
    slug = context["slug"]
    context.setdefault("may_decide", user is not None and isinstance(slug, str) and user.may_review(slug))
    context.setdefault("may_manage", user is not None and user.is_admin)
    done = request.session.pop("flash", None) if has_session else None
    html = (
        _env()
        .get_template(template)
        .render(
            flash=done if isinstance(done, dict) else None,
            csrf=token,
            csrf_input=Markup('<input type="hidden" name="csrf" value="{}">').format(token),
            logged_in=has_session and "sid" in request.session,
            user=user,
            **context,
        )
    )
    return HTMLResponse(html, status_code=status)


def flash(request: Request, text: str, slug: str | None = None, version: str | None = None) -> None:
    """A message for the next page this session shows: what an action did and the version it made."""
    request.session["flash"] = {"text": text, "slug": slug, "version": version}


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a (blocking) service function in the thread pool."""
    return await run_in_threadpool(fn, *args, **kwargs)


async def expand(request: Request, slug: str, version: str) -> str:
    """The full id of the version a person named by a unique prefix (7+ hex digits) of it."""
    who = require_admin(request)
    return await call(versions.expand, services_of(request), who, slug, version)


async def _form(request: Request) -> dict[str, str]:
    """The url-encoded form body (read up to MAX_FORM_BYTES). Raises TooLarge, InvalidRequest.

    A declared Content-Length over the limit is refused before a byte of the body is read; a field
    holding NUL is refused as the API and MCP refuse it (kbserver.core.inputs), before any store.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise InvalidRequest("the Content-Length header must be a number of bytes")
        if int(declared) > MAX_FORM_BYTES:
            raise TooLarge(f"the form is over {MAX_FORM_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise TooLarge(f"the form is over {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=_MAX_FIELDS, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form could not be read; reload the page and retry") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidRequest(f"form field {key} is given more than once")
        out[key] = value
    check_input(out)
    return out


async def admin_form(request: Request) -> dict[str, str]:
    """The form of a state-changing POST from a logged-in admin with this session's CSRF token.

    Raises LoginRequired (no session), Forbidden (no or another session's CSRF token), TooLarge,
    InvalidRequest; nothing has changed when it raises.
    """
    require_admin(request)
    form = await _form(request)
    check_csrf(request, form.get("csrf"))
    return form


async def login_form(request: Request) -> dict[str, str]:
    """The login form (CSRF-checked against the visitor's pre-login session)."""
    form = await _form(request)
    check_csrf(request, form.get("csrf"))
    return form
