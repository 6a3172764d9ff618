"""Who is calling, and what they may do with a KB."""

from __future__ import annotations

import hmac

from kbserver.control import AgentRow
from kbserver.core.errors import Forbidden, NotFound, Unauthorized
from kbserver.core.model import Caller, Permission
from kbserver.services.context import Services
from kbserver.services.models import Access

__all__ = [
    "ADMIN",
    "MISSING_TOKEN",
    "UNKNOWN_TOKEN",
    "authenticate",
    "caller_for",
    "permission",
    "require_read",
    "require_write",
]

ADMIN = Caller(name="admin", is_admin=True)
MISSING_TOKEN = "send Authorization: Bearer TOKEN (an agent token or the admin token)"
UNKNOWN_TOKEN = (
    "the token is not known (mistyped, rotated, or its agent was deleted); "
    "send a current agent token or the admin token"
)


def authenticate(services: Services, token: str | None, admin_token: str) -> Caller:
    """The caller behind a bearer token. Raises Unauthorized."""
    if not token:
        raise Unauthorized(MISSING_TOKEN)
    if hmac.compare_digest(token.encode(), admin_token.encode()):
        return ADMIN
    row = services.control.agent_by_token(token)
    if row is None:
        raise Unauthorized(UNKNOWN_TOKEN)
    return _agent(row)


def caller_for(services: Services, agent: str) -> Caller:
    """The caller for a named agent (stdio MCP, CLI). Raises NotFound."""
    row = services.control.agent(agent)
    if row is None:
        raise NotFound(f"agent {agent} does not exist; create it with `kbserver agent create {agent}`")
    return _agent(row)


def _agent(row: AgentRow) -> Caller:
    return Caller(
        name=row.name, links=row.links, tools=row.tools, parent=row.parent, auto_record=row.auto_record
    )


def permission(caller: Caller, slug: str) -> Access | None:
    """`admin`, the agent's link permission, or None when the KB is not visible to the caller."""
    if caller.is_admin:
        return "admin"
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
    require_read(services, caller, slug)
    if caller.is_admin:
        return None
    perm = caller.links[slug]
    if perm == "read":
        raise Forbidden(f"you have read-only access to KB {slug}; ask an admin for read_write", slug=slug)
    return perm
