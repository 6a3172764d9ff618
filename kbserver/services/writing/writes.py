"""The write use case: permission, runs, proposals, then one commit through the KB's writer."""

from __future__ import annotations

from kbserver.changes import apply
from kbserver.core.errors import ApprovalUnavailable, Forbidden
from kbserver.core.model import Caller, WriteRequest
from kbserver.services.access.auth import require_write
from kbserver.services.context import Services
from kbserver.services.models import WriteOutcome
from kbserver.services.reading.privacy import check_writes
from kbserver.services.reading.runs import owned_run
from kbserver.services.writing.commits import commit
from kbserver.services.writing.idempotency import once
from kbserver.services.writing.proposals import propose
from kbserver.services.writing.reserved import check_caps, check_owner
from kbserver.store import Fence

__all__ = ["submit"]


def submit(
    services: Services,
    caller: Caller,
    slug: str,
    req: WriteRequest,
    *,
    tool_set: str = "context",
    idempotency_key: str | None = None,
) -> WriteOutcome:
    """A write: a new version, or for a `read_write_ask` agent a pending proposal.

    `tool_set` names the dialect that makes the write (files reserved for another set are refused).
    With `idempotency_key`, a repeat of the same write within 24 h answers the first result.
    Raises NotFound, Forbidden, ApprovalUnavailable, InvalidRequest (a key reused for another
    write) and every error of `changes.apply`.
    """
    permission = require_write(services, caller, slug)
    if idempotency_key is not None:
        return once(
            services,
            caller,
            slug,
            idempotency_key,
            req,
            lambda fence: _submit(services, caller, slug, req, tool_set, permission, fence),
        )
    return _submit(services, caller, slug, req, tool_set, permission, None)


def _submit(
    services: Services,
    caller: Caller,
    slug: str,
    req: WriteRequest,
    tool_set: str,
    permission: str | None,
    fence: Fence | None,
) -> WriteOutcome:
    check_owner(caller, (f.path for f in req.files), tool_set)
    run = None
    if req.run_id is not None:
        run = owned_run(services, caller, req.run_id)
        if slug not in run.mounts:
            raise Forbidden(
                f"run {req.run_id} did not mount KB {slug}; start a run that includes it", slug=slug
            )
    limits = services.limits(slug)
    if permission == "read_write_ask":
        if run is None or not run.interactive:
            raise ApprovalUnavailable(
                f"your writes to {slug} need an admin's approval, which is only possible inside an "
                'interactive run; start one with POST /runs {"interactive": true} and pass its run_id',
                slug=slug,
            )
        return propose(services, caller, slug, req, run.id, fence)
    kind = "human_edit" if caller.is_human else "agent_write"
    subject = "human edit" if caller.is_human else "agent write"
    return commit(
        services,
        caller,
        slug,
        lambda tip: check_writes(caller, tip, check_caps(tip, apply(tip, req.files, limits))),
        kind=kind,
        message=req.message,
        run_id=req.run_id,
        default_subject=subject,
        fence=fence,
    )
