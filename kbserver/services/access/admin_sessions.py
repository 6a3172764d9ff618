"""The web admin's sessions and failed logins, kept in the control store so every node agrees.

A session id lives in the signed cookie; the control store keeps only its hash and whose it is
(a person, or the admin token's), until it expires or is logged out (on any node: the next request
on every node sees the logout). Failed logins are counted in the control store too, so the limiter
holds across nodes, under two keys: the client address, and the account with the address. A person
is never locked out by someone else's wrong passwords from another address.
"""

from __future__ import annotations

import secrets
import time

from kbserver.control import email_key
from kbserver.core.model import Caller
from kbserver.services.access.auth import ADMIN, person_caller
from kbserver.services.context import Services

__all__ = [
    "caller_of",
    "end",
    "is_alive",
    "login_blocked",
    "login_failed",
    "login_failures",
    "login_succeeded",
    "start",
]


def start(services: Services, expires: float, person: str | None = None) -> str:
    """A new session id, recorded as valid until `expires`, of `person` (None: the admin token)."""
    sid = secrets.token_urlsafe(16)
    services.control.add_session(sid, expires, person)
    return sid


def is_alive(services: Services, sid: str, now: float) -> bool:
    """Whether `sid` was started, has not expired at `now` and was not ended (on any node)."""
    return services.control.session_alive(sid, now)


def caller_of(services: Services, sid: str, now: float) -> Caller | None:
    """Who the live session `sid` signs in (the admin, or a person with their current role), else None."""
    row = services.control.session(sid, now)
    if row is None:
        return None
    if row.person is None:
        return ADMIN
    person = services.control.person(row.person)
    return person_caller(person) if person is not None else None


def end(services: Services, sid: str) -> None:
    services.control.end_session(sid)


def _keys(address: str, account: str | None) -> list[str]:
    keys = [address]
    if account is not None:
        keys.append(f"account:{email_key(account)} {address}")
    return keys


def login_failed(services: Services, address: str, window: float, account: str | None = None) -> int:
    """Count a failed login from `address` (for `account`, an email, when one was given); returns
    the larger of the failures of the address and of the account from it, within `window` seconds."""
    now = time.time()
    return max(services.control.login_failed(key, now, window) for key in _keys(address, account))


def login_failures(services: Services, address: str, window: float) -> int:
    return services.control.login_failures(address, time.time(), window)


def login_blocked(
    services: Services, address: str, account: str | None, window: float, per_address: int, per_account: int
) -> bool:
    """Whether `address` had `per_address` failures within `window`, or the account from that
    address `per_account` (an account's failures from other addresses do not count)."""
    now = time.time()
    if services.control.login_failures(address, now, window) >= per_address:
        return True
    if account is None:
        return False
    return services.control.login_failures(_keys(address, account)[1], now, window) >= per_account


def login_succeeded(services: Services, address: str, account: str | None = None) -> None:
    """Forget the failures of `account` from `address`; a sign-in with the admin token (no account)
    forgets the address's."""
    for key in _keys(address, account)[1:] if account is not None else [address]:
        services.control.login_succeeded(key)
