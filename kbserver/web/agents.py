"""Agents: create (its token shown once), rotate a token, delete, and links with a permission per KB."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from kbserver.services import kbs
from kbserver.services.access import agents, connections
from kbserver.services.reviewing import activity
from kbserver.web.page import admin_form, call, flash, render, see_other, services_of
from kbserver.web.session import require_admin

__all__ = ["agents_page", "create", "delete", "link", "rotate", "unlink"]

PERMISSIONS = ("read", "read_write", "read_write_ask")


async def agents_page(request: Request) -> Response:
    who = require_admin(request)
    services = services_of(request)
    listing = await call(agents.listing, services, who)
    slugs = [kb.slug for kb in await call(kbs.visible, services, who)]
    recent = await call(activity.agents, services, who, [a.name for a in listing.agents])
    linked = await call(connections.listing, services, who)
    return render(
        request,
        "agents.html",
        agents=listing.agents,
        recent=recent,
        window=activity.WINDOW_DAYS,
        slugs=slugs,
        tool_sets=agents.TOOL_SETS,
        permissions=PERMISSIONS,
        connections=linked,
        when=_when,
    )


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


async def create(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    tools = [t.strip() for t in form.get("tools", "context").split(",") if t.strip()]
    agent, token = await call(
        agents.create,
        services_of(request),
        who,
        form.get("name", "").strip(),
        form.get("parent", "").strip() or None,
        tools or ["context"],
        form.get("auto_record") == "on",
    )
    return render(request, "token.html", 201, agent=agent, token=token, created=True)


async def rotate(request: Request) -> Response:
    who = require_admin(request)
    await admin_form(request)
    agent, token = await call(agents.rotate, services_of(request), who, str(request.path_params["name"]))
    return render(request, "token.html", agent=agent, token=token, created=False)


async def delete(request: Request) -> Response:
    who = require_admin(request)
    await admin_form(request)
    name = str(request.path_params["name"])
    await call(agents.delete, services_of(request), who, name)
    flash(request, f"Deleted agent {name}: its token no longer works.")
    return see_other("/admin/agents")


async def link(request: Request) -> Response:
    who = require_admin(request)
    form = await admin_form(request)
    name = str(request.path_params["name"])
    kb, permission = form.get("kb", ""), form.get("permission", "")
    await call(agents.link, services_of(request), who, name, kb, permission)
    flash(request, f"Linked {name} to {kb} with permission {permission}.")
    return see_other("/admin/agents")


async def unlink(request: Request) -> Response:
    who = require_admin(request)
    await admin_form(request)
    p = request.path_params
    await call(agents.unlink, services_of(request), who, str(p["name"]), str(p["slug"]))
    flash(request, f"Removed the link of {p['name']} to {p['slug']}: it no longer reaches that KB.")
    return see_other("/admin/agents")
