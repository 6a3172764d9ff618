"""The admin as one ASGI app (mounted at /admin): routes, the session and header middleware, errors."""

from __future__ import annotations

import logging
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kbserver.core.errors import InvalidRequest, KBError, NotFound
from kbserver.services import Services
from kbserver.web import (
    agents,
    browse,
    connect,
    edit,
    glance,
    history,
    inbox,
    login,
    memories,
    oidc,
    proposals,
)
from kbserver.web.page import render, see_other
from kbserver.web.session import (
    LoginLimiter,
    LoginRequired,
    SecurityHeaders,
    SessionCheck,
    login_url,
    session_secret,
)

__all__ = ["SESSION_SECONDS", "admin_app"]

log = logging.getLogger("kbserver.web")

SESSION_SECONDS = 12 * 3600
_STATIC = Path(__file__).resolve().parent / "static"
KB = "/kbs/{slug}"


async def _login_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LoginRequired)
    return see_other(login_url(exc.next_url))


async def _kb_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KBError)
    return render(request, "error.html", exc.status, error=exc, slug=request.path_params.get("slug"))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    err: KBError = (
        NotFound("there is no such page") if exc.status_code == 404 else InvalidRequest(str(exc.detail))
    )
    status = exc.status_code if exc.status_code < 500 else 400
    response = render(request, "error.html", status, error=err, slug=None)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return render(
        request, "error.html", 500, error=KBError("an internal error occurred; it has been logged"), slug=None
    )


def admin_app(
    services: Services,
    admin_token: str,
    session_seconds: int = SESSION_SECONDS,
    *,
    secure_cookies: bool = False,
    sso: oidc.OidcConfig | None = None,
    public_url: str = "http://127.0.0.1:8765",
    loopback_clients: bool = False,
) -> Starlette:
    """The web admin for `services`; login with `admin_token`; sessions last `session_seconds`.

    The session cookie is `Secure` on HTTPS requests, and on every request with `secure_cookies`.
    With `sso`, people may also sign in through that OpenID Connect provider.
    `public_url` is the OAuth issuer named in the consent page's redirects.
    """
    routes = [
        Route("/", browse.kb_list, methods=["GET"]),
        Route("/login", login.login_page, methods=["GET"]),
        Route("/login", login.login, methods=["POST"]),
        Route("/logout", login.logout, methods=["POST"]),
        Route("/oidc/start", oidc.start, methods=["GET"]),
        Route("/oidc/callback", oidc.callback, methods=["GET"]),
        Route("/agents", agents.agents_page, methods=["GET"]),
        Route("/agents", agents.create, methods=["POST"]),
        Route("/agents/{name}/token", agents.rotate, methods=["POST"]),
        Route("/agents/{name}/delete", agents.delete, methods=["POST"]),
        Route("/agents/{name}/links", agents.link, methods=["POST"]),
        Route("/agents/{name}/links/{slug}/delete", agents.unlink, methods=["POST"]),
        Route("/connect", connect.connect_page, methods=["GET"]),
        Route("/connect", connect.connect, methods=["POST"]),
        Route("/connections/{id}/revoke", connect.revoke, methods=["POST"]),
        Route(KB, browse.files_page, methods=["GET"]),
        Route(KB + "/files/{path:path}", browse.file_page, methods=["GET"]),
        Route(KB + "/search", browse.search_page, methods=["GET"]),
        Route(KB + "/week", glance.week_page, methods=["GET"]),
        Route(KB + "/memories", memories.memories_page, methods=["GET"]),
        Route(KB + "/edit/{path:path}", edit.edit_page, methods=["GET"]),
        Route(KB + "/new", edit.new_page, methods=["GET"]),
        Route(KB + "/publish", edit.publish, methods=["POST"]),
        Route(KB + "/delete/{path:path}", edit.delete_page, methods=["GET"]),
        Route(KB + "/delete", edit.delete, methods=["POST"]),
        Route(KB + "/versions", history.versions_page, methods=["GET"]),
        Route(KB + "/compare", history.compare_form, methods=["GET"]),
        Route(KB + "/versions/{version}", history.version_page, methods=["GET"]),
        Route(KB + "/versions/{version}/revert", history.revert, methods=["POST"]),
        Route(KB + "/versions/{version}/undo", inbox.undo, methods=["POST"]),
        Route(KB + "/review", inbox.review_page, methods=["GET"]),
        Route(KB + "/review", inbox.mark_reviewed, methods=["POST"]),
        Route(KB + "/proposals", proposals.proposals_page, methods=["GET"]),
        Route(KB + "/proposals/{proposal}/approve", proposals.approve, methods=["POST"]),
        Route(KB + "/proposals/{proposal}/reject", proposals.reject, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=_STATIC), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders, secure_cookies=secure_cookies),
        Middleware(
            SessionMiddleware,
            secret_key=session_secret(admin_token),
            session_cookie="kbserver_admin",
            max_age=session_seconds,
            path="/admin",
            same_site="strict",
        ),
        Middleware(SessionCheck, services=services),
    ]
    handlers = {
        LoginRequired: _login_required,
        KBError: _kb_error,
        HTTPException: _http_error,
        Exception: _unexpected,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.services = services
    app.state.admin_token = admin_token
    app.state.session_seconds = session_seconds
    app.state.public_url = public_url
    app.state.loopback_clients = loopback_clients
    app.state.login_limiter = LoginLimiter(services)
    app.state.oidc = oidc.Oidc(sso, session_secret(admin_token)) if sso is not None else None
    return app
