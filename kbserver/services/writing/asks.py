"""A proposal as its agent asks about it, by id alone (pending, approved, rejected or stale), and the
decision taken on the approval card in the agent's chat."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kbserver.control import ProposalRow
from kbserver.core.errors import Forbidden, InvalidRequest, NotFound
from kbserver.core.model import Caller
from kbserver.services.access.auth import ADMIN
from kbserver.services.context import Services
from kbserver.services.models import Approval, DiffEntry, Proposal, ProposalFile, Rejection
from kbserver.services.writing import proposals

__all__ = ["AskStatus", "ProposalState", "decide", "find", "state", "status"]

AskStatus = Literal["pending", "approved", "rejected", "stale"]


class ProposalState(BaseModel):
    """What became of a proposal (`get_proposal`); `diff` only while it is pending or stale."""

    model_config = ConfigDict(frozen=True)
    id: str
    kb: str
    status: AskStatus
    version: str | None = Field(default=None, description="the version it became (approved)")
    reason: str | None = Field(
        default=None, description="the admin's reason (rejected) or why approving it now fails (stale)"
    )
    files: list[ProposalFile]
    message: str | None = None
    diff: list[DiffEntry] | None = Field(
        default=None, description="what approving it now would change (pending only)"
    )


def find(services: Services, caller: Caller, proposal_id: str) -> ProposalRow:
    """The proposal `proposal_id` among the KBs the caller can read (an agent: its own proposals
    only; another agent's is not_found, like one that does not exist). Raises NotFound."""
    slugs = services.repos.slugs() if caller.is_human else sorted(caller.links)
    for slug in slugs:
        row = services.control.proposal(slug, proposal_id) if services.repos.exists(slug) else None
        if row is not None:
            if caller.is_human or caller.made(row.agent, row.agent_id):
                return row
            break
    raise NotFound(f"proposal {proposal_id} does not exist or is not yours", proposal=proposal_id)


def state(slug: str, p: Proposal) -> ProposalState:
    """`p` as get_proposal shows it: `applying` is still pending; a pending one that would fail now
    (`conflict`) is stale."""
    status: AskStatus
    reason = p.reason
    if p.status == "approved":
        status = "approved"
    elif p.status == "rejected":
        status = "rejected"
    elif p.conflict is not None:
        status, reason = "stale", f"{p.conflict.code}: {p.conflict.message}"
    else:
        status = "pending"
    return ProposalState(
        id=p.id,
        kb=slug,
        status=status,
        version=p.version,
        reason=reason,
        files=p.files,
        message=p.message,
        diff=p.diff if status == "pending" else None,
    )


def status(services: Services, caller: Caller, proposal_id: str) -> ProposalState:
    """The state of the caller's proposal `proposal_id`. Raises NotFound."""
    row = find(services, caller, proposal_id)
    return state(row.slug, proposals.shown(services, row))


def decide(
    services: Services,
    caller: Caller,
    proposal_id: str,
    decision: str,
    reason: str | None = None,
    *,
    by_admin: bool,
) -> Approval | Rejection:
    """Approve or reject `proposal_id` from the approval card, as the admin.

    `by_admin`: the call presented the admin's credential (the edge checks it; the connection's own
    token is the proposing agent's, which never may decide). The proposal is looked up among the
    caller's own (the admin's: all). Raises Forbidden, InvalidRequest, NotFound and every error of
    proposals.approve and proposals.reject.
    """
    if not by_admin:
        raise Forbidden(
            "only the admin approves or rejects proposals: enter the admin token in the approval card, "
            "or decide in the web admin",
            proposal=proposal_id,
        )
    if decision not in ("approve", "reject"):
        raise InvalidRequest("decision must be approve or reject", decision=decision)
    row = find(services, caller, proposal_id)  # no diff: the decision computes its own
    if decision == "approve":
        return proposals.approve(services, ADMIN, row.slug, row.id)
    return proposals.reject(services, ADMIN, row.slug, row.id, reason)
