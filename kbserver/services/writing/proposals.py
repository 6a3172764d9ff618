"""Ask before write: proposals of `read_write_ask` agents, and their approval or rejection."""

from __future__ import annotations

import logging
import secrets
import time

from kbserver.changes import apply, refuse_secrets
from kbserver.control import PROPOSAL_STATUSES, ProposalRow
from kbserver.core.errors import Forbidden, InvalidRequest, KBError, NotFound, NotPending
from kbserver.core.messages import check_message
from kbserver.core.model import Caller, WriteRequest, utc_iso
from kbserver.services.access.auth import require_read
from kbserver.services.context import Services
from kbserver.services.models import (
    Approval,
    Change,
    DiffEntry,
    ErrorInfo,
    Proposal,
    ProposalAccepted,
    ProposalFile,
    ProposalList,
    ProposalPending,
    Rejection,
)
from kbserver.services.parts import Files
from kbserver.services.reading.privacy import check_writes
from kbserver.services.writing.commits import commit, summary
from kbserver.services.writing.idempotency import KeyFence, taken_over
from kbserver.services.writing.reserved import check_caps
from kbserver.store import CommitPlan, Fence

__all__ = ["approve", "get", "listing", "propose", "reject", "shown"]

log = logging.getLogger(__name__)

# An approval holds its claim (status `applying`) only while it commits, which the writer bounds to
# about a minute; a claim older than this belongs to a process that died, and is settled from main.
# The claim's fencing token keeps this safe at any timeout: settling happens under the KB's writer
# lock, and an approval commits only while its claim is current (checked under that lock).
CLAIM_TIMEOUT_SECONDS = 600.0


def propose(
    services: Services,
    caller: Caller,
    slug: str,
    req: WriteRequest,
    run_id: str,
    fence: Fence | None = None,
) -> ProposalAccepted:
    """Validate `req` exactly like a write and keep it on refs/proposals/{id}. Raises like a write."""
    check_message(req.message)
    refuse_secrets(req.message, "message")
    proposal_id = "prop_" + secrets.token_hex(8)
    limits = services.limits(slug)
    _, writer = services.repos.get(slug)
    subject = req.message.strip() if req.message and req.message.strip() else None

    def job(tip: Files) -> CommitPlan:
        applied = check_writes(caller, tip, check_caps(tip, apply(tip, req.files, limits)))
        paths = [a.path for a in applied]
        return CommitPlan(
            {a.path: a.content for a in applied},
            subject or f"proposal: {summary(paths)}",
            f"{caller.actor} <{caller.name}@kbserver.invalid>",
            {"Kb-Actor": caller.actor, "Kb-Kind": "proposal", "Kb-Run": run_id, "Kb-Proposal": proposal_id},
            fence=fence,
        )

    ref_commit, base, _ = writer.propose(job, f"refs/proposals/{proposal_id}")
    # A keyed write records its proposal only while its reservation is current: a repeat that took
    # the key over looked for this proposal and did not find it, so it makes its own.
    key = (fence.actor, fence.key, fence.token) if isinstance(fence, KeyFence) else None
    recorded = services.control.add_proposal(
        ProposalRow(
            id=proposal_id,
            slug=slug,
            agent=caller.name,
            agent_id=caller.agent_id,
            run_id=run_id,
            created=time.time(),
            status="pending",
            base=base,
            ref_commit=ref_commit,
            request=req.model_dump(mode="json", exclude_none=True),
            reason=None,
            decided_by=None,
            decided=None,
            version=None,
        ),
        key,
    )
    if not recorded:
        raise taken_over()
    return ProposalAccepted(proposal=ProposalPending(id=proposal_id, status="pending"))


def _render(services: Services, p: ProposalRow, with_diff: bool) -> Proposal:
    req = WriteRequest.model_validate(p.request)
    diff, conflict = None, None
    if with_diff and p.status == "pending":
        diff, conflict = _diff_against_head(services, p.slug, req)
    return Proposal(
        id=p.id,
        agent=p.agent,
        created=utc_iso(p.created),
        status=p.status,
        files=[ProposalFile(path=f.path, mode=f.mode) for f in req.files],
        message=req.message,
        run=p.run_id,
        base=p.base,
        reason=p.reason,
        decided_by=p.decided_by,
        decided=utc_iso(p.decided) if p.decided is not None else None,
        version=p.version,
        diff=diff,
        conflict=conflict,
    )


def _diff_against_head(
    services: Services, slug: str, req: WriteRequest
) -> tuple[list[DiffEntry], ErrorInfo | None]:
    """What approving now would change, or why it would be refused."""
    repo = services.repos.repo(slug)
    head = repo.head()
    tip = repo.view(head)
    try:
        applied = check_caps(tip, apply(tip, req.files, services.limits(slug)))
    except KBError as err:
        return [], ErrorInfo.model_validate(err.to_dict())
    diff = []
    for a in applied:
        old = tip.read(a.path)
        new = a.content
        change: Change = "added" if old is None else "deleted" if new is None else "modified"
        diff.append(DiffEntry(path=a.path, change=change, patch=repo.text_patch(a.path, old, new)))
    return diff, None


def _row(services: Services, caller: Caller, slug: str, proposal_id: str) -> ProposalRow:
    require_read(services, caller, slug)
    p = services.control.proposal(slug, proposal_id) if isinstance(proposal_id, str) else None
    if p is None or (not caller.is_human and not caller.made(p.agent, p.agent_id)):
        raise NotFound(f"proposal {proposal_id} does not exist in KB {slug}", proposal=proposal_id)
    return p


def listing(services: Services, caller: Caller, slug: str, status: str | None = None) -> ProposalList:
    """Proposals of a KB (an agent sees its own), newest first. Raises NotFound, InvalidRequest."""
    require_read(services, caller, slug)
    if status is not None and status not in PROPOSAL_STATUSES:
        raise InvalidRequest("status must be pending, applying, approved or rejected", status=status)
    rows = services.control.proposals(slug, status)
    if not caller.is_human:
        rows = [p for p in rows if caller.made(p.agent, p.agent_id)]
    return ProposalList(proposals=[_render(services, p, with_diff=True) for p in rows])


def get(services: Services, caller: Caller, slug: str, proposal_id: str) -> Proposal:
    """One proposal with its diff against the head and the reason of a rejection. Raises NotFound."""
    return shown(services, _row(services, caller, slug, proposal_id))


def shown(services: Services, p: ProposalRow) -> Proposal:
    """`p` as the API shows it, with its diff against the head while it is pending."""
    return _render(services, p, with_diff=True)


def _decidable(services: Services, caller: Caller, slug: str, proposal_id: str) -> ProposalRow:
    if not caller.may_review(slug):
        require_read(services, caller, slug)
        raise Forbidden(
            f"only the admin, an owner or a reviewer of KB {slug} can approve or reject its proposals",
            slug=slug,
        )
    return _settled(services, _row(services, caller, slug, proposal_id))


def _not_pending(services: Services, slug: str, proposal_id: str) -> NotPending:
    p = services.control.proposal(slug, proposal_id)
    status = p.status if p is not None else "pending"
    doing = "being approved right now" if status == "applying" else status
    return NotPending(
        f"proposal {proposal_id} is {doing}, no longer pending", proposal=proposal_id, status=status
    )


def _landed(services: Services, p: ProposalRow) -> str | None:
    """The version on main that carries `Kb-Proposal: {p.id}`, looking back no further than its base."""
    repo = services.repos.repo(p.slug)
    head = repo.head()
    if head is None:
        return None
    for version in repo.first_parents(head):
        if version == p.base:
            return None
        if repo.commit_info(version).trailers.get("Kb-Proposal") == p.id:
            return version
    return None


def _abandoned(p: ProposalRow) -> bool:
    claimed = p.claimed if p.status == "applying" else None
    return claimed is not None and time.time() - claimed >= CLAIM_TIMEOUT_SECONDS


def _settled(services: Services, p: ProposalRow) -> ProposalRow:
    """`p`, after settling a claim whose approval died: approved if main has it, else pending again.

    Under the KB's writer lock, so no approval moves main between the look at main and the decision;
    moving the claim on makes its fencing token stale, so the old approval can no longer commit.
    """
    if not _abandoned(p):
        return p
    _, writer = services.repos.get(p.slug)
    with writer.locked():
        p = services.control.proposal(p.slug, p.id) or p
        if not _abandoned(p):
            return p
        version = _landed(services, p)
        if version is not None:
            services.control.finish_proposal(p.slug, p.id, version, p.fence)
        else:
            services.control.release_proposal(
                p.slug, p.id, "the approval was interrupted; approve again", p.fence
            )
    log.warning("proposal %s of KB %s: settled an abandoned approval (%s)", p.id, p.slug, version)
    return services.control.proposal(p.slug, p.id) or p


def approve(services: Services, caller: Caller, slug: str, proposal_id: str) -> Approval:
    """Re-apply the proposal on the current head as one `approval` version.

    The proposal is first claimed (pending -> applying, compare-and-set in the control store), so of
    two approvals or an approval and a rejection, in any processes, exactly one proceeds. The claim
    carries a fencing token the commit records (`Kb-Fence`); an approval whose claim was settled as
    abandoned meanwhile is refused by the writer (NotPending). A proposal that went stale is refused
    with the write's error and stays pending with the reason.
    Raises Forbidden, NotFound, NotPending and every error of `changes.apply`.
    """
    p = _decidable(services, caller, slug, proposal_id)
    token = services.control.claim_proposal(slug, p.id, caller.actor) if p.status == "pending" else None
    if token is None:
        raise _not_pending(services, slug, p.id)

    def check() -> None:
        if not services.control.proposal_fence_current(slug, p.id, token):
            now = services.control.proposal(slug, p.id)
            raise NotPending(
                f"proposal {p.id}: this approval waited so long for the KB's writer that its claim "
                "was settled as abandoned; read the proposal to see its status",
                proposal=p.id,
                status=now.status if now is not None else "pending",
            )

    req = WriteRequest.model_validate(p.request)
    limits = services.limits(slug)
    agent = services.control.agent(p.agent)
    author = Caller(name=p.agent) if agent is not None else caller
    try:
        result = commit(
            services,
            caller,
            slug,
            lambda tip: check_caps(tip, apply(tip, req.files, limits)),
            kind="approval",
            message=req.message,
            run_id=p.run_id,
            default_subject="approved agent write",
            # The approver let the version in (CONTRACT §8: Kb-Actor names who decided); the git
            # author stays the agent that wrote the change, and the API's author reads it from there.
            trailers={
                "Kb-Proposal": p.id,
                "Kb-Actor": caller.actor,
                "Kb-Approver": caller.actor,
                "Kb-Approved-By": caller.actor,
            },
            author=author,
            fence=Fence(token, check),
        )
    except KBError as err:
        services.control.release_proposal(slug, p.id, f"{err.code}: {err.message}", token)
        raise
    except BaseException:
        landed = _landed(services, p)  # a failure after main moved must not leave it pending
        if landed is not None:
            services.control.finish_proposal(slug, p.id, landed, token)
        else:
            services.control.release_proposal(slug, p.id, "the approval failed; approve again", token)
        raise
    if not services.control.finish_proposal(slug, p.id, result.version, token):
        # A claim settled as abandoned after this approval committed: settling found it on main.
        log.warning("proposal %s of KB %s: approved as %s, recorded by settling", p.id, slug, result.version)
    return Approval(version=result.version, status="approved", id=p.id)


def reject(
    services: Services, caller: Caller, slug: str, proposal_id: str, reason: str | None = None
) -> Rejection:
    """Reject a pending proposal with an optional reason the agent can read.

    One compare-and-set (pending -> rejected), so no approval can land once it says rejected.
    Raises Forbidden, NotFound, NotPending.
    """
    p = _decidable(services, caller, slug, proposal_id)
    if p.status != "pending" or not services.control.reject_proposal(slug, p.id, caller.actor, reason):
        raise _not_pending(services, slug, p.id)
    return Rejection(status="rejected", id=p.id)
