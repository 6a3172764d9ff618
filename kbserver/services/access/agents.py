"""Agents, their tokens and their links to KBs (admin only)."""

from __future__ import annotations

import re
import secrets

from kbserver.control import AgentRow
from kbserver.core.errors import AlreadyExists, Forbidden, InvalidRequest, NotFound
from kbserver.core.model import AGENT_PATTERN, Caller, Permission
from kbserver.services.access import toolsets
from kbserver.services.context import Services
from kbserver.services.models import Agent, AgentDeleted, AgentList, Link

__all__ = ["TOOL_SETS", "create", "delete", "get", "link", "listing", "render", "rotate", "unlink"]

TOOL_SETS = toolsets.TOOL_SETS
"""The registered tool sets by name (kbserver.services.access.toolsets; filled in at start)."""
PERMISSIONS = ("read", "read_write", "read_write_ask")
_NAME = re.compile(AGENT_PATTERN)


def _admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("only the admin can manage agents and links")


def render(row: AgentRow) -> Agent:
    return Agent(
        name=row.name,
        parent=row.parent,
        tools=list(row.tools),
        auto_record=row.auto_record,
        links=[Link(kb=slug, permission=perm) for slug, perm in sorted(row.links.items())],
    )


def _token() -> str:
    return "kbs_" + secrets.token_urlsafe(32)


def create(
    services: Services,
    caller: Caller,
    name: str,
    parent: str | None = None,
    tools: list[str] | None = None,
    auto_record: bool = False,
) -> tuple[Agent, str]:
    """Create an agent; returns it and its token (shown once, stored only as a hash).

    Raises Forbidden, InvalidRequest, AlreadyExists, NotFound (unknown parent).
    """
    _admin(caller)
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest("agent name must match ^[a-z0-9][a-z0-9_-]{0,62}$", name=name)
    chosen = toolsets.check_tool_sets(tools or toolsets.DEFAULT_TOOL_SETS)
    if parent is not None and services.control.agent(parent) is None:
        raise NotFound(f"parent agent {parent} does not exist", parent=parent)
    token = _token()
    if not services.control.add_agent(name, token, parent, chosen, auto_record):
        raise AlreadyExists(f"an agent named {name} already exists", name=name)
    return get(services, caller, name), token


def get(services: Services, caller: Caller, name: str) -> Agent:
    """Raises Forbidden, NotFound."""
    _admin(caller)
    row = services.control.agent(name)
    if row is None:
        raise NotFound(f"agent {name} does not exist", name=name)
    return render(row)


def listing(services: Services, caller: Caller) -> AgentList:
    """Raises Forbidden."""
    _admin(caller)
    return AgentList(agents=[render(r) for r in services.control.agents()])


def delete(services: Services, caller: Caller, name: str) -> AgentDeleted:
    """Delete an agent and its links; its token stops working at once. Raises Forbidden, NotFound."""
    _admin(caller)
    if not services.control.delete_agent(name):
        raise NotFound(f"agent {name} does not exist", name=name)
    return AgentDeleted(name=name, deleted=True)


def rotate(services: Services, caller: Caller, name: str) -> tuple[Agent, str]:
    """A new token for the agent; the old one stops working. Raises Forbidden, NotFound."""
    _admin(caller)
    token = _token()
    if not services.control.set_token(name, token):
        raise NotFound(f"agent {name} does not exist", name=name)
    return get(services, caller, name), token


def link(services: Services, caller: Caller, name: str, slug: str, permission: str) -> Agent:
    """Give an agent a permission on a KB, replacing any earlier one.

    Raises Forbidden, NotFound, InvalidRequest.
    """
    _admin(caller)
    if permission not in PERMISSIONS:
        raise InvalidRequest("permission must be read, read_write or read_write_ask", permission=permission)
    if services.control.agent(name) is None:
        raise NotFound(f"agent {name} does not exist", name=name)
    if not isinstance(slug, str) or not services.repos.exists(slug):
        raise NotFound(f"KB {slug} does not exist", slug=slug)
    perm: Permission = permission  # type: ignore[assignment]
    services.control.link(name, slug, perm)
    return get(services, caller, name)


def unlink(services: Services, caller: Caller, name: str, slug: str) -> Agent:
    """Raises Forbidden, NotFound."""
    _admin(caller)
    if not services.control.unlink(name, slug):
        raise NotFound(f"agent {name} has no link to KB {slug}", name=name, slug=slug)
    return get(services, caller, name)
