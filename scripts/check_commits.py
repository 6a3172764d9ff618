"""Commit subjects read as `layer: what` in under 72 characters (STYLE.md), for every commit since
this check was added; older history is left as it was written.

Usage: python scripts/check_commits.py [REPO]   (exit 1 listing the subjects that do not)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
# A layer (a package, a file or a short noun such as `cluster test`), a colon, then the change.
SUBJECT = re.compile(r"^[a-z0-9][a-z0-9_./, -]{0,30}: \S")
THIS_FILE = "scripts/check_commits.py"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def problems(repo: Path) -> list[str]:
    """Each subject since the commit that added this script (that one included) that breaks the rule."""
    added = _git(repo, "log", "--diff-filter=A", "--format=%H", "--", THIS_FILE).split()
    if not added:
        return []  # not committed yet: the commit that adds it is checked once it exists
    base = added[-1]
    found = []
    for line in _git(repo, "log", "--no-merges", "--format=%h %s", f"{base}~1..HEAD").splitlines():
        sha, _, subject = line.partition(" ")
        if len(subject) >= MAX_SUBJECT:
            found.append(f"{sha} is {len(subject)} characters (under {MAX_SUBJECT}): {subject}")
        elif not SUBJECT.match(subject):
            found.append(f"{sha} does not read `layer: what`: {subject}")
    return found


def main() -> int:
    repo = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    try:
        _git(repo, "rev-parse", "--git-dir")
    except (OSError, subprocess.CalledProcessError):
        print("check_commits: not a git checkout; nothing to check")
        return 0
    if _git(repo, "rev-parse", "--is-shallow-repository").strip() == "true":
        print("check_commits: a shallow clone lacks the history to check; skipped")
        return 0
    found = problems(repo)
    for problem in found:
        print(f"commit subject: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
