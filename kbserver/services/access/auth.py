"""Who is calling, and what they may do with a KB."""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Mapping

from kbserver.control import AgentRow, PersonRow
from kbserver.core.errors import Forbidden, NotFound, Unauthorized
from kbserver.core.model import Caller, Permission
from kbserver.services.context import Services
from kbserver.services.models import Access

__all__ = [
    "ADMIN",
    "BEARER_FAILURES",
    "BEARER_WINDOW",
    "MISSING_TOKEN",
    "TOO_MANY_FAILURES",
    "UNKNOWN_TOKEN",
    "agent_caller",
    "authenticate",
    "authorize_metrics",
    "caller_for",
    "client_address",
    "permission",
    "person_caller",
    "require_read",
    "require_write",
]

ADMIN = Caller(name="admin", is_admin=True)
MISSING_TOKEN = "send Authorization: Bearer TOKEN (an agent token or the admin token)"
UNKNOWN_TOKEN = (
    "the token is not known (mistyped, rotated, or its agent was deleted); "
    "send a current agent token or the admin token"
)


BEARER_FAILURES = 100
"""Failed bearer checks (unknown tokens) one client may make within BEARER_WINDOW seconds; past them
it is answered 401 `unauthorized` with `Retry-After`, its token not even checked."""
BEARER_WINDOW = 900.0  # the login form's window (kbserver.web.session.LoginLimiter): one table
BEARER_RETRY_AFTER = 60
"""The Retry-After of a refused client: ask again then (the block lasts while the failures of the
last BEARER_WINDOW seconds number BEARER_FAILURES or more)."""
TOO_MANY_FAILURES = (
    f"too many unknown tokens from this address (over {BEARER_FAILURES} within {int(BEARER_WINDOW)} s); "
    "no token is checked from it until the count falls, so wait and retry with a current token"
)

# Clients with a failure seen by this process: only their requests cost a look at the counter, so a
# request with a good token from anyone else costs no query. Another node's failures are met here at
# this node's first failure from the same client (the counter is in the control store).
_suspects: dict[str, float] = {}
_suspects_lock = threading.Lock()
_MAX_SUSPECTS = 10_000


def client_address(scope: Mapping[str, object]) -> str | None:
    """The client address of an ASGI request (the peer; None when the server does not say)."""
    client = scope.get("client")
    if isinstance(client, tuple | list) and client and isinstance(client[0], str):
        return client[0]
    return None


def _suspect(key: str, now: float) -> bool:
    with _suspects_lock:
        seen = _suspects.get(key)
        if seen is not None and seen <= now - BEARER_WINDOW:
            del _suspects[key]
            seen = None
        return seen is not None


def _mark(key: str, now: float) -> None:
    with _suspects_lock:
        if len(_suspects) >= _MAX_SUSPECTS:
            for old in [k for k, at in _suspects.items() if at <= now - BEARER_WINDOW] or list(_suspects)[:1]:
                del _suspects[old]
        _suspects[key] = now


def _throttled() -> Unauthorized:
    return Unauthorized(TOO_MANY_FAILURES, retry_after=BEARER_RETRY_AFTER)


def authenticate(
    services: Services, token: str | None, admin_token: str, address: str | None = None, people: bool = False
) -> Caller:
    """The caller behind a bearer token; with `people`, a person's personal token too (the HTTP API
    takes one wherever it takes the admin token). Raises Unauthorized.

    With `address` (the client: an IP address, or a key such as `agent NAME` for a token passed as a
    tool argument), failed checks are counted per client in the control store, across nodes: past
    BEARER_FAILURES within BEARER_WINDOW seconds the client is refused (details `retry_after`)."""
    if not token:
        raise Unauthorized(MISSING_TOKEN)
    key = None if address is None else f"bearer {address}"
    _refuse_throttled(services, key)
    if hmac.compare_digest(token.encode(), admin_token.encode()):
        return ADMIN
    row = services.control.agent_by_token(token)
    if row is not None:
        return agent_caller(row)
    person = services.control.person_by_token(token) if people else None
    if person is None:
        if key is not None:
            now = time.time()
            failures = services.control.login_failed(key, now, BEARER_WINDOW)
            _mark(key, now)
            if failures > BEARER_FAILURES:
                raise _throttled()
        raise Unauthorized(UNKNOWN_TOKEN)
    return person_caller(person)


def _refuse_throttled(services: Services, key: str | None) -> None:
    if key is not None and _suspect(key, time.time()):
        if services.control.login_failures(key, time.time(), BEARER_WINDOW) >= BEARER_FAILURES:
            raise _throttled()


def authorize_metrics(
    services: Services, token: str | None, metrics_token: str | None, admin_token: str, address: str | None
) -> None:
    """Let `/metrics` through for the metrics token, the admin token or an owner's personal token.

    The metrics token is one more secret to guess, so a client past the bearer cap is refused before
    it is compared, and a wrong one counts as a failure like any other bearer. Raises Unauthorized,
    Forbidden (a token that is neither)."""
    if token and metrics_token:
        _refuse_throttled(services, None if address is None else f"bearer {address}")
        if hmac.compare_digest(token.encode(), metrics_token.encode()):
            return
    if not authenticate(services, token, admin_token, address, people=True).is_admin:
        raise Forbidden("/metrics needs the admin token or the metrics token (KBSERVER_METRICS_TOKEN)")


def person_caller(row: PersonRow) -> Caller:
    """A person as a caller: an owner may do what the admin may (and is named in versions); a
    reviewer or viewer reads every KB and changes only what their role allows."""
    return Caller(
        name=row.name,
        is_admin=row.role == "owner",
        person=row.name,
        role=row.role,
        reviews=frozenset(row.reviews) if row.role == "reviewer" else frozenset(),
    )


def caller_for(services: Services, agent: str) -> Caller:
    """The caller for a named agent (stdio MCP, CLI). Raises NotFound."""
    row = services.control.agent(agent)
    if row is None:
        raise NotFound(f"agent {agent} does not exist; create it with `kbserver agent create {agent}`")
    return agent_caller(row)


def agent_caller(row: AgentRow) -> Caller:
    """The caller an agent's row stands for (its static token and its connections alike)."""
    return Caller(
        name=row.name,
        links=row.links,
        tools=row.tools,
        parent=row.parent,
        auto_record=row.auto_record,
        agent_id=row.id,
    )


def permission(caller: Caller, slug: str) -> Access | None:
    """`admin`, the agent's link permission, or None when the KB is not visible to the caller.

    A reviewer has `read_write` on the KBs they review and `read` on every other, a viewer `read`.
    """
    if caller.is_admin:
        return "admin"
    if caller.is_person:
        return "read_write" if caller.may_review(slug) else "read"
    return caller.links.get(slug)


def require_read(services: Services, caller: Caller, slug: str) -> Access:
    """The caller's access to the KB. Raises NotFound unless the KB exists and the caller may see it
    (never revealing which)."""
    perm = permission(caller, slug)
    if perm is None or not services.repos.exists(slug):
        raise NotFound(f"KB {slug} does not exist or is not visible to you", slug=slug)
    return perm


def require_write(services: Services, caller: Caller, slug: str) -> Permission | None:
    """The caller's write permission (None for the admin). Raises NotFound or Forbidden."""
    perm = require_read(services, caller, slug)
    if perm == "admin":
        return None
    if perm == "read" and caller.is_person:
        raise Forbidden(
            f"you are a {caller.role} and do not review KB {slug}; ask an owner to make you its reviewer",
            slug=slug,
        )
    if perm == "read":
        raise Forbidden(f"you have read-only access to KB {slug}; ask an admin for read_write", slug=slug)
    return perm
