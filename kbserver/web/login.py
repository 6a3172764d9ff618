"""The login and logout pages: a person's Email and Password, or the admin token in a field labelled
Token; one message for every failure of each."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core import threads
from kbserver.services.access import people
from kbserver.services.access.auth import client_address
from kbserver.web.page import admin_form, login_form, render, see_other, services_of
from kbserver.web.session import LoginLimiter, log_in, log_out, matches, safe_next

__all__ = ["login", "login_page", "logout"]

log = logging.getLogger("kbserver.web")

FAILED = "That token is not the admin token, or there were too many attempts; wait a moment and retry."
FAILED_PERSON = (
    "That email and password do not match, or there were too many attempts; wait a moment and retry."
)


def _sso(request: Request) -> bool:
    return request.app.state.oidc is not None


def _address(request: Request) -> str:
    return client_address(request.scope) or "unknown"


async def login_page(request: Request) -> Response:
    next_url = safe_next(request.query_params.get("next"))
    return render(request, "login.html", next=next_url, error=None, email="", sso=_sso(request))


async def login(request: Request) -> Response:
    form = await login_form(request)
    next_url = safe_next(form.get("next"))
    limiter: LoginLimiter = request.app.state.login_limiter
    address = _address(request)
    token = form.get("token", "").strip()
    email = form.get("email", "").strip()
    lifetime = request.app.state.session_seconds
    if not token and email:
        if not await limiter.blocked(address, email):
            found = await threads.run(
                people.check_password, services_of(request), email, form.get("password", "")
            )
            if found is not None:
                await limiter.succeeded(address, email)
                await threads.run(log_in, request, lifetime, found.name)
                return see_other(next_url)
        await limiter.failed(address, email)
        log.warning("failed sign-in with a password from %s", address)  # never the password
        return render(
            request, "login.html", 401, next=next_url, error=FAILED_PERSON, email=email, sso=_sso(request)
        )
    if token and not await limiter.blocked(address) and matches(token, request.app.state.admin_token):
        await limiter.succeeded(address)
        await threads.run(log_in, request, lifetime)
        return see_other(next_url)
    await limiter.failed(address)
    log.warning("failed admin login from %s", address)  # never the token
    return render(request, "login.html", 401, next=next_url, error=FAILED, email="", sso=_sso(request))


async def logout(request: Request) -> Response:
    await admin_form(request)
    await threads.run(log_out, request)
    return see_other("/admin/login")
