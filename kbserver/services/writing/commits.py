"""One version from a job: the commit metadata (subject, author, trailers) every use case shares."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kbserver.changes import Applied, refuse_secrets
from kbserver.core.messages import check_message
from kbserver.core.model import Caller, FileResult, WriteResult
from kbserver.services.context import Services
from kbserver.services.parts import Files
from kbserver.store import CommitPlan, Fence

__all__ = ["commit", "summary"]

log = logging.getLogger(__name__)


def summary(paths: list[str]) -> str:
    """`notes/a.md`, or `3 files`: the subject of a commit that changes `paths`."""
    return paths[0] if len(paths) == 1 else f"{len(paths)} files"


def _author(caller: Caller) -> str:
    return f"{caller.actor} <{caller.name}@kbserver.invalid>"


def commit(
    services: Services,
    caller: Caller,
    slug: str,
    job: Callable[[Files], list[Applied]],
    *,
    kind: str,
    message: str | None,
    run_id: str | None,
    default_subject: str,
    trailers: dict[str, str] | None = None,
    author: Caller | None = None,
    fence: Fence | None = None,
) -> WriteResult:
    """Apply `job` on the current head as one version of `kind`; re-applied if the head moves.

    With `fence`, the version commits only while that lease is current (recorded as `Kb-Fence`).

    Raises InvalidRequest for a message the contract refuses, SecretDetected for a message holding
    a credential, and whatever `job` raises (KBErrors from changes).
    """
    check_message(message)
    refuse_secrets(message, "message")
    _, writer = services.repos.get(slug)
    who = author or caller

    def plan(tip: Files) -> CommitPlan:
        applied = job(tip)
        paths = [a.path for a in applied]
        meta = {"Kb-Actor": who.actor, "Kb-Kind": kind}
        if run_id:
            meta["Kb-Run"] = run_id
        meta.update(trailers or {})
        subject = message.strip() if message and message.strip() else f"{default_subject}: {summary(paths)}"
        return CommitPlan({a.path: a.content for a in applied}, subject, _author(who), meta, applied, fence)

    version, parent, result = writer.submit(plan)
    try:
        services.committed(slug, version)
    except Exception:  # main has moved: the caller must hear of its version, not of a hook's bug
        log.exception("KB %s: a commit hook failed after version %s", slug, version)
    applied_list = result if isinstance(result, list) else []
    return WriteResult(
        version=version,
        parent=parent,
        files=[FileResult(path=a.path, mode=a.mode, sha256=a.sha256) for a in applied_list],
    )
