"""The approval card (MCP Apps): a proposal shown in the agent's chat, approved or rejected there.

- write_context names the card (`_meta.ui.resourceUri`, CARD_URI); a host with MCP Apps renders it with
  the call's result: the proposal's files, modes, diff against the current head, stale or not.
- Approve opens the proposal's page in the web admin (`ui/open-link`, the public URL), where the person
  signs in as themselves and decides; back in the chat the card asks `get_proposal` and shows the
  outcome. The card never asks for a token, and no tool decides a proposal: the card's calls travel
  on the proposing agent's own connection, which must never approve its own writes.
- Clients without MCP Apps get the same as text, plus the URL of the proposal in the web admin.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from mcp.server.apps import Apps
from mcp.types import CallToolResult, TextContent

from kbserver.core.model import Caller
from kbserver.services import Services
from kbserver.services.reviewing import proposal_cards
from kbserver.services.writing import asks, proposals

__all__ = [
    "CARD_META",
    "CARD_URI",
    "approval",
    "approval_result",
    "approval_text",
    "card_apps",
    "files_in_words",
]

CARD_URI = "ui://kbserver/proposal-card.html"
CARD_META: dict[str, Any] = {"ui": {"resourceUri": CARD_URI}}
"""The `_meta` of write_context: its result is shown in the card."""


def card_apps() -> Apps:
    """The MCP Apps extension with the card's resource (advertises `io.modelcontextprotocol/ui`)."""
    apps = Apps()
    html = resources.files("kbserver.mcp").joinpath("card.html").read_text(encoding="utf-8")
    apps.add_html_resource(
        CARD_URI,
        html,
        name="proposal_card",
        title="Approve or reject a proposal",
        description="An agent's proposal: its files, diff and staleness, with Approve and Reject.",
        prefers_border=True,
    )
    return apps


_MODES = {
    "create": "create {path} (a new file)",
    "append": "add to the end of {path}",
    "edit": "edit part of {path}",
    "overwrite": "replace all of {path}",
    "delete": "delete {path}",
}


def files_in_words(files: list[dict[str, Any]]) -> list[str]:
    """Each file of a proposal as what approving does to it: `create notes/a.md (a new file)`."""
    return [_MODES.get(str(f["mode"]), "change {path}").format(path=f["path"]) for f in files]


def approval(services: Services, caller: Caller, proposal_id: str, base_url: str | None) -> dict[str, Any]:
    """What the card shows of a proposal: its state (files, diff, stale), who asked and why, the files
    and the stale state in a person's words, a title, and its web admin URL."""
    row = asks.find(services, caller, proposal_id)
    shown = proposals.shown(services, row)
    found = asks.state(row.slug, shown)
    data = found.model_dump(mode="json")
    path = f"/admin/kbs/{found.kb}/proposals?p={found.id}#p-{found.id}"  # ?p= survives signing in
    data["admin_url"] = base_url.rstrip("/") + path if base_url else path
    data["card"] = CARD_URI
    words = files_in_words(data["files"])
    subject = (found.message or "").strip().split("\n", 1)[0]
    data["asked_by"] = shown.agent
    data["files_words"] = words
    data["title"] = subject or f"{shown.agent} asks to {words[0]}" + (
        f" and {len(words) - 1} more" if len(words) > 1 else ""
    )
    data["stale_words"] = None
    if shown.conflict is not None:
        details = shown.conflict.model_dump()
        paths = [str(details["path"])] if details.get("path") else []
        data["stale_words"] = proposal_cards.explain(shown.conflict.code, paths, shown.conflict.message)
    return data


def approval_text(data: dict[str, Any]) -> str:
    """The card as text, for clients without MCP Apps."""
    lines = [
        f"Proposal {data['id']} for KB {data['kb']} is {data['status']}: an admin must approve it before it "
        "becomes part of the KB.",
        "Files: " + ", ".join(f"{f['mode']} {f['path']}" for f in data["files"]),
    ]
    if data["status"] == "stale":
        lines.append(f"It no longer applies to the current version: {data['reason']}")
    for d in data.get("diff") or []:
        lines.append(f"--- {d['change']} {d['path']}\n{d['patch']}")
    lines.append(
        f"Ask the person you work for to approve or reject it in the web admin: {data['admin_url']} . "
        "get_proposal tells you what became of it."
    )
    return "\n".join(lines)


def approval_result(result: dict[str, Any], data: dict[str, Any]) -> CallToolResult:
    """A write's `{proposal}` result with the card's data (`approval`), as JSON and as text."""
    full = {**result, "approval": data}
    return CallToolResult(
        content=[
            TextContent(type="text", text=json.dumps(full, ensure_ascii=False)),
            TextContent(type="text", text=approval_text(data)),
        ],
        structured_content=full,
    )
