"""Whether a node should get requests (/healthz), fsck of a whole data folder, and repacks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kbserver.core.errors import KBError
from kbserver.services.context import Services

__all__ = ["Readiness", "fsck", "ready", "repack"]

log = logging.getLogger(__name__)


@dataclass
class Readiness:
    """A node's state for its balancer: `starting` until it serves, `draining` once told to stop."""

    starting: bool = True
    draining: bool = False
    unreachable: bool = False  # the control store did not answer the last check (logged once per outage)


def ready(services: Services, readiness: Readiness) -> tuple[bool, str]:
    """(whether to send this node requests, why not): not while it starts or drains, nor while its
    control store does not answer. The reason names no host (the endpoint is public)."""
    if readiness.starting:
        return False, "starting"
    if readiness.draining:
        return False, "draining"
    try:
        services.control.ping()
    except KBError as err:
        if not readiness.unreachable:
            log.error("not ready: %s", err.message)
        readiness.unreachable = True
        return False, "the control store does not answer"
    if readiness.unreachable:
        log.info("ready again: the control store answers")
    readiness.unreachable = False
    return True, "ok"


def fsck(services: Services, report: Callable[[str], None] = print) -> list[str]:
    """Check every KB and the control plane; returns the problems (empty when all is sound)."""
    problems: list[str] = []
    slugs = services.repos.slugs()
    for slug in slugs:
        removed = services.repos.recover(slug)
        for lock in removed:
            report(f"{slug}: removed stale lock {lock}")
        found = [f"{slug}: {p}" for p in services.repos.verify(slug)]
        if services.repos.repo(slug).head() is None:
            found.append(f"{slug}: branch main is missing")
        report(f"{slug}: {'ok' if not found else f'{len(found)} problem(s)'}")
        problems += found
    control = services.control.integrity_errors()
    problems += [f"control.db: {p}" for p in control]
    known = {row.slug for row in services.control.kbs()}
    problems += [f"control.db: KB {s} has a repository but no record" for s in slugs if s not in known]
    problems += [f"control.db: KB {s} has a record but no repository" for s in sorted(known - set(slugs))]
    report(f"control.db: {'ok' if not control else f'{len(control)} problem(s)'}")
    return problems


def repack(
    services: Services, slug: str | None, full: bool = False, report: Callable[[str], None] = print
) -> int:
    """Repack one KB (or every KB) now, with deltas; `full` computes every delta again (slow on a
    long history, and the smallest result). Returns how many KBs were repacked. Raises NotFound."""
    done = 0
    for each in [slug] if slug is not None else services.repos.slugs():
        line = services.repos.repack(each, full=full)
        report(f"{each}: {line}" if line else f"{each}: a repack is running already; skipped")
        done += line is not None
    return done
