"""The web admin's sessions and failed logins, kept in the control store so every node agrees.

A session id lives in the admin's signed cookie; the control store keeps only its hash, until it
expires or the admin logs out (on any node: the next request on every node sees the logout). Failed
logins are counted per address in the control store too, so the limiter holds across nodes.
"""

from __future__ import annotations

import secrets
import time

from kbserver.services.context import Services

__all__ = ["end", "is_alive", "login_failed", "login_failures", "login_succeeded", "start"]


def start(services: Services, expires: float) -> str:
    """A new session id, recorded as valid until `expires`."""
    sid = secrets.token_urlsafe(16)
    services.control.add_session(sid, expires)
    return sid


def is_alive(services: Services, sid: str, now: float) -> bool:
    """Whether `sid` was started, has not expired at `now` and was not ended (on any node)."""
    return services.control.session_alive(sid, now)


def end(services: Services, sid: str) -> None:
    services.control.end_session(sid)


def login_failed(services: Services, address: str, window: float) -> int:
    """Count a failed login from `address`; returns its failures within the last `window` seconds."""
    return services.control.login_failed(address, time.time(), window)


def login_failures(services: Services, address: str, window: float) -> int:
    return services.control.login_failures(address, time.time(), window)


def login_succeeded(services: Services, address: str) -> None:
    services.control.login_succeeded(address)
