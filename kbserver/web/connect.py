"""The consent page: a signed-in person lets an MCP client (Claude.ai, ChatGPT, ...) act as an agent.

The client sent the person here from `/authorize` with a signed request. The page names the client
(saying plainly when its name is unverified), lets the person pick the agent the connection acts as
(a new one by default) and a permission per KB no higher than they may grant; Allow sends the
browser back to the client with a code, Deny with `access_denied`. The Agents page lists and revokes
connections.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from kbserver.core.errors import InvalidRequest
from kbserver.core.model import Caller
from kbserver.services import kbs
from kbserver.services.access import agents, connections
from kbserver.services.access.auth import ADMIN
from kbserver.services.access.connections import Pending
from kbserver.web.page import admin_form, call, flash, render, see_other, services_of
from kbserver.web.session import CSP, require_admin

__all__ = ["connect", "connect_page", "revoke"]

NO_ACCESS = ""
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_NETLOC = re.compile(r"^[A-Za-z0-9.\-:\[\]]+$")


def _person(request: Request) -> Caller:
    """Who is signed in: the admin (as an owner) or a person, whose role bounds what they may grant."""
    return require_admin(request)


def _key(request: Request) -> bytes:
    return connections.request_key(request.app.state.admin_token)


def _form_action(redirect_uri: str) -> str:
    """The page's CSP with the client's redirect target allowed as a form action: Chrome applies
    `form-action` to the redirect that follows the form's submission."""
    parts = urlsplit(redirect_uri)
    scheme = parts.scheme.lower()
    if not _SCHEME.match(scheme):
        return CSP
    if scheme in ("http", "https"):
        if not _NETLOC.match(parts.netloc):
            return CSP
        source = f"{scheme}://{parts.netloc}"
    else:
        source = f"{scheme}:"
    return CSP.replace("form-action 'self'", f"form-action 'self' {source}")


async def _context(request: Request, person: Caller, pending: Pending) -> dict[str, Any]:
    services = services_of(request)
    loopback = bool(request.app.state.loopback_clients)
    info = await call(connections.client, services, pending.client_id, loopback)
    if info is None:
        raise InvalidRequest("this app is not registered here any more; start connecting again from it")
    from_document = pending.client_id.startswith(("https://", "http://"))
    host = urlsplit(pending.redirect_uri).hostname or pending.redirect_uri.split(":", 1)[0]
    name = str(info.get("client_name") or host)
    slugs = [kb.slug for kb in await call(kbs.visible, services, ADMIN)]  # what the person may grant decides
    choices = {slug: connections.grantable(person, slug) for slug in slugs}
    listing = await call(agents.listing, services, ADMIN)
    eligible = [
        a.name for a in listing.agents if all(link.permission in choices.get(link.kb, ()) for link in a.links)
    ]
    return {
        "request_blob": request.query_params.get("request", ""),
        "client_name": name,
        "verified_by": urlsplit(pending.client_id).hostname if from_document else None,
        "redirect_host": host,
        "new_name": await call(connections.default_agent, services, name, person),
        "agents": eligible,
        "choices": choices,
        "preselect": {s: _preselect(c) for s, c in choices.items()},
        "person": person.person or person.name,
    }


def _preselect(choices: tuple[str, ...]) -> str:
    if "read_write_ask" in choices:
        return "read_write_ask"
    return choices[-1] if choices else NO_ACCESS


async def connect_page(request: Request) -> Response:
    person = _person(request)
    pending = connections.pending(_key(request), request.query_params.get("request", ""))
    context = await _context(request, person, pending)
    response = render(request, "connect.html", **context, error=None)
    response.headers["content-security-policy"] = _form_action(pending.redirect_uri)
    return response


async def connect(request: Request) -> Response:
    form = await admin_form(request)
    pending = connections.pending(_key(request), form.get("request", ""))
    issuer = str(request.app.state.public_url)
    if form.get("decision") != "allow":
        return see_other(connections.deny(pending, issuer))
    person = _person(request)
    chosen = form.get("agent", "")
    permissions = {
        key[len("kb:") :]: value
        for key, value in form.items()
        if key.startswith("kb:") and value != NO_ACCESS
    }
    url = await call(
        connections.allow,
        services_of(request),
        person,
        pending,
        issuer,
        chosen or None,
        form.get("name", ""),
        permissions,
        bool(request.app.state.loopback_clients),
    )
    return see_other(url)


async def revoke(request: Request) -> Response:
    await admin_form(request)
    grant = await call(
        connections.revoke, services_of(request), _person(request), str(request.path_params["id"])
    )
    flash(
        request, f"Revoked the connection of {grant.client_name} as {grant.agent}: its tokens no longer work."
    )
    return see_other("/admin/agents")
