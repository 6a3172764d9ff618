"""Who is looking: the signed session cookie, login and logout, CSRF tokens, security headers."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import quote, urlsplit

import anyio
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbserver.core import threads
from kbserver.core.errors import Forbidden, KBError
from kbserver.core.model import Caller
from kbserver.services.access import admin_sessions
from kbserver.services.context import Services

__all__ = [
    "CSP",
    "LoginLimiter",
    "LoginRequired",
    "SecurityHeaders",
    "SessionCheck",
    "check_csrf",
    "csrf_token",
    "log_in",
    "log_out",
    "login_url",
    "matches",
    "require_admin",
    "safe_next",
    "session_secret",
    "signed_in",
]

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Adds the strict headers to every answer of the admin, error pages included, and marks its
    cookies `Secure` on HTTPS (the scheme a trusted proxy forwarded counts) or with `secure_cookies`."""

    def __init__(self, app: ASGIApp, secure_cookies: bool = False) -> None:
        self.app, self.secure_cookies = app, secure_cookies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        secure = self.secure_cookies or scope.get("scheme") == "https"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    if name in ("cache-control", "content-security-policy") and name in headers:
                        continue  # static files keep their caching; the consent page its form-action
                    headers[name] = value
                if secure:
                    _secure_cookies(message)
            await send(message)

        await self.app(scope, receive, send_with_headers)


_ALIVE = "kbserver.session_alive"  # scope key: the cookie session's caller (None: not live), or why unknown


class SessionCheck:
    """Looks up the cookie's session in the control store (off the event loop) once per request:
    whose it is, with the person's current role.

    Goes inside Starlette's SessionMiddleware; `require_admin` reads the answer. A logout on any
    node, or deleting the person, ends the session here at the next request.
    """

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app, self.services = app, services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = scope.get("session")
        sid = session.get("sid") if isinstance(session, dict) else None
        if scope["type"] == "http" and isinstance(sid, str):
            try:
                caller_of = admin_sessions.caller_of
                scope[_ALIVE] = await threads.run(caller_of, self.services, sid, time.time())
            except KBError as err:
                scope[_ALIVE] = err
        await self.app(scope, receive, send)


def _secure_cookies(message: Message) -> None:
    """Add the Secure flag to every Set-Cookie of a response start that lacks it."""
    raw: list[tuple[bytes, bytes]] = []
    for name, value in message.get("headers", []):
        if name.lower() == b"set-cookie" and b"secure" not in value.lower().split(b"; "):
            value += b"; secure"
        raw.append((name, value))
    message["headers"] = raw


def session_secret(admin_token: str) -> str:
    """The cookie signing key, derived from the admin token: changing the token ends every session."""
    return hmac.new(admin_token.encode(), b"kbserver web session", hashlib.sha256).hexdigest()


class LoginRequired(Exception):
    """No valid session: the page answers 303 to the login page, which comes back after."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def csrf_token(request: Request) -> str:
    """The session's CSRF token (made on first use, so the login form has one too)."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return token


def check_csrf(request: Request, sent: str | None) -> None:
    """Raises Forbidden unless `sent` is this session's CSRF token."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or not isinstance(sent, str) or not hmac.compare_digest(token, sent):
        raise Forbidden("this form is out of date or came from another page; reload the page and retry")


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def require_admin(request: Request) -> Caller:
    """Who is signed in: the admin, or a person (whose role the services enforce). Raises
    LoginRequired unless the session has not expired and was not logged out (on any node: sessions
    live in the control store)."""
    s = request.session
    expires, sid = s.get("expires"), s.get("sid")
    if not isinstance(expires, int | float) or expires < time.time() or not isinstance(sid, str):
        raise LoginRequired(_here(request))
    alive = request.scope.get(_ALIVE)
    if isinstance(alive, KBError):
        raise alive  # the control store could not say (unreachable): an error page, not a login
    if not isinstance(alive, Caller):
        raise LoginRequired(_here(request))
    return alive


def signed_in(request: Request) -> Caller | None:
    """Who this session signs in, when `require_admin` let the request in (for the page header)."""
    alive = request.scope.get(_ALIVE)
    return alive if isinstance(alive, Caller) and "sid" in request.session else None


def _here(request: Request) -> str:
    url = request.url.path
    if request.method == "GET" and request.url.query:
        url += "?" + request.url.query
    return url if request.method == "GET" else "/admin/"


def login_url(next_url: str) -> str:
    return "/admin/login?next=" + quote(next_url, safe="/")


def safe_next(value: str | None) -> str:
    """Where to go after login: a path inside /admin only (never another site)."""
    if not value or not value.startswith("/admin") or value.startswith("//") or "\\" in value:
        return "/admin/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or any(ord(c) < 32 for c in value):
        return "/admin/"
    return value


def log_in(request: Request, lifetime: float, person: str | None = None) -> None:
    """A fresh session of `person` (None: the admin token's), with a new id and CSRF token:
    nothing from before the login carries over."""
    expires = time.time() + lifetime
    sid = admin_sessions.start(_services(request), expires, person)
    request.session.clear()
    request.session.update({"sid": sid, "csrf": secrets.token_urlsafe(32), "expires": expires})


def log_out(request: Request) -> None:
    sid = request.session.get("sid")
    if isinstance(sid, str):
        admin_sessions.end(_services(request), sid)
    request.session.clear()


class LoginLimiter:
    """A small delay after each failed login, growing with the failures, and two caps.

    After `cap` failures from an address within `window` seconds, or `account_cap` for one account
    (email) from that address, the sign-in is refused without checking the password or token until
    the window passes; an account's failures from other addresses never lock it out here. Every
    failure gets the same message. The failures are counted in the control store, so the caps hold
    across processes and nodes.
    """

    def __init__(
        self,
        services: Services,
        cap: int = 20,
        window: float = 900.0,
        step: float = 0.5,
        longest: float = 5.0,
        account_cap: int = 10,
    ) -> None:
        self.services = services
        self.cap, self.window, self.step, self.longest = cap, window, step, longest
        self.account_cap = account_cap

    async def blocked(self, address: str, account: str | None = None) -> bool:
        return await threads.run(
            admin_sessions.login_blocked,
            self.services,
            address,
            account,
            self.window,
            self.cap,
            self.account_cap,
        )

    async def failed(self, address: str, account: str | None = None) -> None:
        count = await threads.run(admin_sessions.login_failed, self.services, address, self.window, account)
        await anyio.sleep(min(self.longest, self.step * count))

    async def succeeded(self, address: str, account: str | None = None) -> None:
        await threads.run(admin_sessions.login_succeeded, self.services, address, account)


def matches(token: str, admin_token: str) -> bool:
    """Whether `token` is the admin token (in constant time)."""
    return hmac.compare_digest(token.encode(), admin_token.encode())
