"""fsck of a whole data folder: every repository and the control plane."""

from __future__ import annotations

from collections.abc import Callable

from kbserver.services.context import Services
from kbserver.store.verify import verify

__all__ = ["fsck"]


def fsck(services: Services, report: Callable[[str], None] = print) -> list[str]:
    """Check every KB and the control plane; returns the problems (empty when all is sound)."""
    problems: list[str] = []
    slugs = services.repos.slugs()
    for slug in slugs:
        removed = services.repos.recover(slug)
        for lock in removed:
            report(f"{slug}: removed stale lock {lock}")
        repo = services.repos.repo(slug)
        found = [f"{slug}: {p}" for p in verify(repo.path)]
        if repo.head() is None:
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
