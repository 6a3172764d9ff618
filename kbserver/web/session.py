"""Who is looking: the signed session cookie, login and logout, CSRF tokens, security headers."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbserver.core.errors import Forbidden

__all__ = [
    "CSP",
    "LoginLimiter",
    "LoginRequired",
    "SecurityHeaders",
    "check_csrf",
    "csrf_token",
    "log_in",
    "log_out",
    "login_url",
    "matches",
    "require_admin",
    "safe_next",
    "session_secret",
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
    """Adds the strict headers to every answer of the admin, error pages included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    if name == "cache-control" and name in headers:
                        continue  # static files keep their own
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def session_secret(admin_token: str) -> str:
    """The cookie signing key, derived from the admin token: changing the token ends every session."""
    return hmac.new(admin_token.encode(), b"kbserver web session", hashlib.sha256).hexdigest()


class LoginRequired(Exception):
    """No valid session: the page answers 303 to the login page, which comes back after."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


@dataclass
class _Revoked:
    """Session ids ended by Logout before their cookie expired (kept until it would have)."""

    until: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sid: str, until: float) -> None:
        with self.lock:
            now = time.time()
            for old in [s for s, t in self.until.items() if t < now]:
                del self.until[old]
            self.until[sid] = until

    def __contains__(self, sid: object) -> bool:
        with self.lock:
            return sid in self.until


_revoked = _Revoked()


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


def require_admin(request: Request) -> None:
    """Raises LoginRequired unless the session is a logged-in admin's that has not expired."""
    s = request.session
    expires, sid = s.get("expires"), s.get("sid")
    if not isinstance(expires, int | float) or expires < time.time() or not isinstance(sid, str):
        raise LoginRequired(_here(request))
    if sid in _revoked:
        raise LoginRequired(_here(request))


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


def log_in(request: Request, lifetime: float) -> None:
    """A fresh session (new id and CSRF token: nothing from before the login carries over)."""
    request.session.clear()
    request.session.update(
        {
            "sid": secrets.token_urlsafe(16),
            "csrf": secrets.token_urlsafe(32),
            "expires": time.time() + lifetime,
        }
    )


def log_out(request: Request) -> None:
    sid, expires = request.session.get("sid"), request.session.get("expires")
    if isinstance(sid, str) and isinstance(expires, int | float):
        _revoked.add(sid, expires)
    request.session.clear()


class LoginLimiter:
    """A small delay after each failed login from an address, growing with the failures, and a cap.

    After `cap` failures within `window` seconds the address is refused without checking the token
    until the window passes. Every failure gets the same message.
    """

    def __init__(self, cap: int = 20, window: float = 900.0, step: float = 0.5, longest: float = 5.0) -> None:
        self.cap, self.window, self.step, self.longest = cap, window, step, longest
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> list[float]:
        kept = [t for t in self._failures.get(address, []) if t > now - self.window]
        if kept:
            self._failures[address] = kept
        else:
            self._failures.pop(address, None)
        return kept

    def blocked(self, address: str) -> bool:
        with self._lock:
            return len(self._recent(address, time.time())) >= self.cap

    async def failed(self, address: str) -> None:
        with self._lock:
            now = time.time()
            recent = self._recent(address, now)
            self._failures[address] = [*recent, now]
            if len(self._failures) > 10_000:  # bounded memory under a spray of addresses
                self._failures.pop(next(iter(self._failures)))
            delay = min(self.longest, self.step * len(self._failures[address]))
        await asyncio.sleep(delay)

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._failures.pop(address, None)


def matches(token: str, admin_token: str) -> bool:
    """Whether `token` is the admin token (in constant time)."""
    return hmac.compare_digest(token.encode(), admin_token.encode())
